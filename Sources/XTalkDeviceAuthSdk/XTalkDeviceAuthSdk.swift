// The device authentication SDK (PROTOCOL.md sections 8 and 9) lands here.
import XTalkCrypto
