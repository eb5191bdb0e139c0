// A hostile legacy HTTP+SSE upstream (run as its own process, so its pacing does not depend on the
// gateway's event loop): after the endpoint event it writes a comment line of `bulk` bytes at once,
// then trickles it one small write at a time (no line end), then ends the line and starts again.
// Comment lines are discarded by any reader, so no event ever grows past the limit.
import { createServer } from 'node:http';
const bulk = Number(process.argv[2] ?? 3_000_000);
const trickle = Number(process.argv[3] ?? 400);
const server = createServer((req, res) => {
  if (req.method === 'GET') {
    res.socket.setNoDelay(true);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('event: endpoint\ndata: /message?sessionId=s\n\n');
    let left = 0;
    const tick = () => {
      if (res.destroyed) return;
      if (left === 0) { res.write(':' + 'x'.repeat(bulk)); left = trickle; }
      else if (--left === 0) res.write('x\n'); else res.write('x');
      setTimeout(tick, 2);
    };
    setTimeout(tick, 50);
    return;
  }
  req.resume();
  req.on('end', () => { res.writeHead(202); res.end(); });
});
server.listen(0, '127.0.0.1', () => console.log(`http://127.0.0.1:${server.address().port}/sse`));
