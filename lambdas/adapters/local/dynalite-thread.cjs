'use strict';
/*
 * dynalite on a worker thread of the gateway's process (see dynalite-thread.ts). Its share of
 * every store request (validation, LevelDB) runs here, beside the gateway's own thread instead
 * of on it. Requests arrive as messages and are handed to dynalite's request listener as
 * in-memory requests; it also listens on loopback, for a look at the record from outside.
 * Plain CommonJS, so the thread needs no TypeScript loader, whoever started the process.
 */
const { EventEmitter } = require('node:events');
const { parentPort, workerData } = require('node:worker_threads');
const dynalite = require('dynalite');

const server = dynalite({ path: workerData.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });

server.once('error', (error) => parentPort.postMessage({ kind: 'failed', message: String(error) }));
server.listen(0, '127.0.0.1', () => parentPort.postMessage({ kind: 'listening', port: server.address().port }));

parentPort.on('message', (message) => {
  if (message.kind === 'close') {
    server.close((error) => parentPort.postMessage({ kind: 'closed', message: error ? String(error) : undefined }));
    return;
  }
  const { id, method, url, headers, body } = message;
  const request = Object.assign(new EventEmitter(), { method, url, headers });
  const response = {
    statusCode: 200,
    headers: {},
    setHeader(name, value) {
      this.headers[name.toLowerCase()] = String(value);
    },
    end(chunk) {
      const text = chunk === undefined ? '' : typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      parentPort.postMessage({ kind: 'response', id, statusCode: this.statusCode, headers: this.headers, body: text });
    },
  };
  try {
    server.emit('request', request, response);
    if (body) request.emit('data', Buffer.from(body));
    request.emit('end');
  } catch (error) {
    parentPort.postMessage({ kind: 'response', id, error: String((error && error.stack) || error) });
  }
});
