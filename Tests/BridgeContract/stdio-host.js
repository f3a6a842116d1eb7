// Runs `xtalk bridge --stdio` and gives the plugin's post(method, params): one JSON line per request, replies
// matched by id. The xtalk binary is $XTALK (default <package>/.build/debug/xtalk).
'use strict';
const { spawn } = require('node:child_process');
const path = require('node:path');
const readline = require('node:readline');

function startBridge(args) {
  const xtalk = process.env.XTALK || path.join(__dirname, '..', '..', '.build', 'debug', 'xtalk');
  const child = spawn(xtalk, ['bridge', '--stdio'].concat(args || []), { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = new Map();
  const replies = new Map(); // id -> how many replies came (each request must get exactly one)
  let nextId = 0;
  readline.createInterface({ input: child.stdout }).on('line', function (line) {
    const reply = JSON.parse(line);
    replies.set(reply.id, (replies.get(reply.id) || 0) + 1);
    const settle = waiting.get(reply.id);
    if (settle) {
      waiting.delete(reply.id);
      settle(reply);
    }
  });
  const exited = new Promise(function (resolve) {
    child.on('exit', function (code) {
      resolve(code);
    });
  });
  function post(method, params) {
    nextId += 1;
    const id = nextId;
    return new Promise(function (resolve) {
      waiting.set(id, resolve);
      child.stdin.write(JSON.stringify({ id: id, method: method, params: params || {} }) + '\n');
    });
  }
  async function stop() {
    child.stdin.end();
    const timer = setTimeout(function () {
      child.kill('SIGKILL');
    }, 10000);
    const code = await exited;
    clearTimeout(timer);
    return code;
  }
  return { post: post, stop: stop, replies: replies, unanswered: waiting };
}

module.exports = { startBridge: startBridge };
