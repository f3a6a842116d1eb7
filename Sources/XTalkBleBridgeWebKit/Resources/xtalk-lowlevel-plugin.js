// The low-level transport plugin of OneKey's JavaScript SDK (env: 'lowlevel'),
// over the xTalk bridge: every method is one request to the native router, which
// answers with one JSON reply, {"id", "result"} or {"id", "error": {"code", "message"}}.
//
//   In a WKWebView:  const plugin = XTalkLowlevelPlugin.createWebKitPlugin();
//   Anywhere else:   const plugin = XTalkLowlevelPlugin.createPlugin(post);
//                    // post(method, params) → Promise of the reply object
//
// Errors are Error objects carrying the numeric HardwareErrorCode (`code`,
// also `errorCode`) and the same words in `message` and `reason` (the SDK's
// transport reads `reason` on send failures, `message` on connect failures).
// `init()` never rejects: the SDK does not await it.
(function (root, factory) {
  if (typeof module === 'object' && module.exports) {
    module.exports = factory();
  } else {
    root.XTalkLowlevelPlugin = factory();
  }
})(typeof self !== 'undefined' ? self : this, function () {
  'use strict';

  const VERSION = '1.0.0';

  function bridgeError(error) {
    const failure = new Error(String(error && error.message));
    failure.code = error && error.code;
    failure.errorCode = failure.code;
    failure.reason = failure.message;
    return failure;
  }

  function createPlugin(post) {
    if (typeof post !== 'function') {
      throw new TypeError('createPlugin needs post(method, params) returning a Promise of the reply');
    }
    async function call(method, params) {
      const reply = await post(method, params || {});
      if (reply && reply.error) {
        throw bridgeError(reply.error);
      }
      return reply ? reply.result : null;
    }
    return {
      version: VERSION,
      init() {
        call('init').catch(function () {});
        return Promise.resolve();
      },
      enumerate() {
        return call('enumerate');
      },
      connect(uuid) {
        return call('connect', { uuid: uuid }).then(function () {});
      },
      disconnect(uuid) {
        return call('disconnect', { uuid: uuid }).then(function () {});
      },
      send(uuid, data, options) {
        const params = { uuid: uuid, data: data };
        if (options && typeof options.withoutResponse === 'boolean') {
          params.options = { withoutResponse: options.withoutResponse };
        }
        return call('send', params).then(function () {});
      },
      receive(uuid) {
        return call('receive', { uuid: uuid });
      },
      getProtocolV2PacketCapacity(uuid) {
        return call('getProtocolV2PacketCapacity', { uuid: uuid }).then(function (value) {
          return value === null ? undefined : value;
        });
      },
    };
  }

  // WKScriptMessageHandlerWithReply (iOS 14+): postMessage resolves with the
  // native reply, here always the router's JSON text.
  function createWebKitPlugin(handlerName) {
    const handler = window.webkit.messageHandlers[handlerName || 'xtalkBleBridge'];
    return createPlugin(function (method, params) {
      return handler.postMessage({ method: method, params: params }).then(function (text) {
        return JSON.parse(text);
      });
    });
  }

  return { VERSION: VERSION, createPlugin: createPlugin, createWebKitPlugin: createWebKitPlugin };
});
