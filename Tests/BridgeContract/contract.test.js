// The JavaScript SDK's call patterns (OneKey's hd-transport-lowlevel, as ../../shared/reference describes them,
// repeated here by a driver of our own: no OneKey code) against the shipped plugin file over `xtalk bridge
// --stdio` and its simulated OneKey-profile echo devices.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { startBridge } = require('./stdio-host.js');
const { createPlugin } = require(
  path.join(__dirname, '..', '..', 'Sources', 'XTalkBleBridgeWebKit', 'Resources', 'xtalk-lowlevel-plugin.js')
);

const RECEIVE_TIMEOUT_MS = 1000;

// The transport wraps every receive in its own timeout and abandons the promise (never cancels it).
function receiveWithTimeout(plugin, uuid, abandoned) {
  const receiving = plugin.receive(uuid);
  return new Promise(function (resolve, reject) {
    const timer = setTimeout(function () {
      abandoned.push(receiving);
      reject(new Error('receive timed out'));
    }, RECEIVE_TIMEOUT_MS);
    receiving.then(
      function (hex) {
        clearTimeout(timer);
        resolve(hex);
      },
      function (error) {
        clearTimeout(timer);
        reject(error);
      }
    );
  });
}

// Reads chunks until `count` bytes came; returns their hex, in order.
async function receiveBytes(plugin, uuid, count, abandoned) {
  let hex = '';
  while (hex.length < count * 2) {
    hex += await receiveWithTimeout(plugin, uuid, abandoned);
  }
  return hex;
}

function bytesHex(length, seed) {
  let hex = '';
  for (let index = 0; index < length; index += 1) {
    hex += ((index * 31 + seed) & 0xff).toString(16).padStart(2, '0');
  }
  return hex;
}

// A V1 message as the SDK sends it: 64-byte packets, '?' (0x3f) then 63 bytes, the last zero-padded.
function v1Packets(messageHex) {
  const packets = [];
  for (let offset = 0; offset < messageHex.length; offset += 126) {
    packets.push('3f' + messageHex.slice(offset, offset + 126).padEnd(126, '0'));
  }
  return packets;
}

async function connected(args) {
  const host = startBridge(args);
  const plugin = createPlugin(host.post);
  await plugin.init();
  const devices = await plugin.enumerate();
  assert.ok(devices.length >= 1, 'enumerate found the simulated device');
  for (const device of devices) {
    assert.equal(device.commType, 'ble');
    assert.match(device.id, /^[0-9A-F-]{36}$/);
  }
  const uuid = devices[0].id;
  await plugin.connect(uuid);
  return { host: host, plugin: plugin, uuid: uuid, devices: devices };
}

async function finish(host, abandoned) {
  const code = await host.stop();
  assert.equal(code, 0, 'xtalk bridge exited cleanly');
  // Every abandoned receive was settled by the bridge (rejected), never left hanging.
  const settled = await Promise.allSettled(abandoned);
  for (const outcome of settled) {
    assert.equal(outcome.status, 'rejected', 'an abandoned receive never got a chunk');
  }
  assert.equal(host.unanswered.size, 0, 'every request was answered');
  for (const [id, count] of host.replies) {
    assert.equal(count, 1, `request ${id} answered ${count} times`);
  }
}

test('plugin surface and version', async function () {
  const host = startBridge();
  const plugin = createPlugin(host.post);
  assert.equal(plugin.version, '1.0.0');
  for (const name of ['init', 'enumerate', 'connect', 'disconnect', 'send', 'receive', 'getProtocolV2PacketCapacity']) {
    assert.equal(typeof plugin[name], 'function', name);
  }
  await finish(host, []);
});

test('connect, then the capacity, read once as the SDK does', async function () {
  const { host, plugin, uuid } = await connected(['--mtu', '247']);
  assert.equal(await plugin.getProtocolV2PacketCapacity(uuid), 244);
  // The SDK calls connect again for a connected id on every acquire.
  await plugin.connect(uuid);
  assert.equal(await plugin.getProtocolV2PacketCapacity(uuid), 244);
  await plugin.disconnect(uuid);
  assert.equal(await plugin.getProtocolV2PacketCapacity(uuid), undefined);
  await finish(host, []);
});

test('V1: 64-byte packets out, chunked receives back, unchanged and in order', async function () {
  const { host, plugin, uuid } = await connected(['--mtu', '23']);
  const abandoned = [];
  const packets = v1Packets(bytesHex(300, 5));
  for (const packet of packets) {
    await plugin.send(uuid, packet);
  }
  const echoed = await receiveBytes(plugin, uuid, packets.length * 64, abandoned);
  assert.equal(echoed, packets.join(''));
  await finish(host, abandoned);
});

test('an older transport: receive() with no uuid reads the one connected device', async function () {
  // Older hd-transport-lowlevel versions call `this.plugin.receive()` (the type says `uuid?: string`).
  const { host, plugin, uuid } = await connected(['--mtu', '23']);
  const abandoned = [];
  const packets = v1Packets(bytesHex(100, 9));
  for (const packet of packets) {
    await plugin.send(uuid, packet);
  }
  assert.equal(await receiveBytes(plugin, undefined, packets.length * 64, abandoned), packets.join(''));
  await plugin.disconnect(uuid);
  await assert.rejects(plugin.receive(), function (error) {
    assert.equal(error.code, 720);
    return true;
  });
  await finish(host, abandoned);
});

test('V2: frames of up to 2048 bytes cut at the capacity, one send per piece', async function () {
  const { host, plugin, uuid } = await connected(['--mtu', '247']);
  const abandoned = [];
  const capacity = await plugin.getProtocolV2PacketCapacity(uuid);
  const frame = '5a' + bytesHex(2047, 9);
  for (let offset = 0; offset < frame.length; offset += capacity * 2) {
    await plugin.send(uuid, frame.slice(offset, offset + capacity * 2));
  }
  assert.equal(await receiveBytes(plugin, uuid, 2048, abandoned), frame);
  await finish(host, abandoned);
});

test('a timed-out receive, then disconnect and connect at once: no stale chunk, the old receive is rejected', async function () {
  const { host, plugin, uuid } = await connected();
  const abandoned = [];
  await assert.rejects(receiveWithTimeout(plugin, uuid, abandoned), /timed out/);
  await plugin.disconnect(uuid);
  await plugin.connect(uuid);
  await host.post('simulator.notify', { uuid: uuid, data: 'beef' });
  assert.equal(await receiveWithTimeout(plugin, uuid, abandoned), 'beef');
  // A chunk queued (nobody receiving) when the link is renewed is not handed to the new connection.
  await host.post('simulator.notify', { uuid: uuid, data: 'dead' });
  await new Promise(function (resolve) {
    setTimeout(resolve, 200);
  });
  await plugin.disconnect(uuid);
  await plugin.connect(uuid);
  await host.post('simulator.notify', { uuid: uuid, data: 'f00d' });
  assert.equal(await receiveWithTimeout(plugin, uuid, abandoned), 'f00d');
  await finish(host, abandoned);
});

test('an abandoned receive followed by a new one: the chunk goes to the new one', async function () {
  const { host, plugin, uuid } = await connected();
  const abandoned = [];
  await assert.rejects(receiveWithTimeout(plugin, uuid, abandoned), /timed out/);
  const fresh = receiveWithTimeout(plugin, uuid, abandoned);
  const old = await Promise.allSettled(abandoned);
  assert.equal(old[0].status, 'rejected');
  assert.equal(old[0].reason.code, 713);
  await host.post('simulator.notify', { uuid: uuid, data: '0102' });
  assert.equal(await fresh, '0102');
  await finish(host, abandoned);
});

test('errors: code and reason for a malformed send, 720 for a receive across a link loss', async function () {
  const { host, plugin, uuid } = await connected();
  const abandoned = [];
  await assert.rejects(plugin.send(uuid, '0x00'), function (error) {
    assert.equal(error.code, 710);
    assert.equal(typeof error.reason, 'string');
    assert.ok(error.reason.length > 0);
    return true;
  });
  const pending = plugin.receive(uuid);
  await host.post('simulator.linkLoss', { uuid: uuid });
  await assert.rejects(pending, function (error) {
    assert.equal(error.code, 720);
    return true;
  });
  await plugin.connect(uuid);
  await plugin.send(uuid, 'c0ffee');
  assert.equal(await receiveWithTimeout(plugin, uuid, abandoned), 'c0ffee');
  await finish(host, abandoned);
});

test('two devices at once keep separate queues', async function () {
  const { host, plugin, devices } = await connected(['--devices', '2']);
  assert.equal(devices.length, 2);
  const [first, second] = devices.map(function (device) {
    return device.id;
  });
  await plugin.connect(second);
  await plugin.send(first, 'aa');
  await plugin.send(second, 'bb');
  const abandoned = [];
  assert.equal(await receiveWithTimeout(plugin, second, abandoned), 'bb');
  assert.equal(await receiveWithTimeout(plugin, first, abandoned), 'aa');
  await finish(host, abandoned);
});

test('createWebKitPlugin: postMessage({method, params}) to the handler, the reply text parsed, errors as Error', async function () {
  const host = startBridge();
  const posted = [];
  // WebKit's side, as WKScriptMessageHandlerWithReply gives it to a page: postMessage resolves with the reply.
  global.window = {
    webkit: {
      messageHandlers: {
        xtalkBleBridge: {
          postMessage: function (body) {
            posted.push(body);
            return host.post(body.method, body.params).then(function (reply) {
              return JSON.stringify(reply);
            });
          },
        },
      },
    },
  };
  try {
    const { createWebKitPlugin } = require(
      path.join(__dirname, '..', '..', 'Sources', 'XTalkBleBridgeWebKit', 'Resources', 'xtalk-lowlevel-plugin.js')
    );
    const plugin = createWebKitPlugin();
    await plugin.init();
    const devices = await plugin.enumerate();
    await plugin.connect(devices[0].id);
    await assert.rejects(plugin.send(devices[0].id, 'zz'), function (error) {
      return error instanceof Error && error.code === 710 && error.reason === error.message;
    });
    assert.deepEqual(posted[2], { method: 'connect', params: { uuid: devices[0].id } });
  } finally {
    delete global.window;
  }
  await finish(host, []);
});
