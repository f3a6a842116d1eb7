// Observable state and the transport error classes come from XTalkSupport,
// which both SDKs share; importing XTalkDeviceAuthSdk is enough to use them.
@_exported import XTalkSupport
