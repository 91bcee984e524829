import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** The TCP sockets a process holds, by state, read from /proc (Linux): what it listens on and what it dialled. */
export function tcpSocketsOf(pid: number): { listening: number; connected: number } {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // A descriptor closed while it was read.
    }
  }
  let listening = 0;
  let connected = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').trim().split('\n').slice(1)) {
      const columns = line.trim().split(/\s+/);
      if (!inodes.has(columns[9])) continue;
      // The kernel's TCP states (include/net/tcp_states.h): 0A LISTEN, 01 ESTABLISHED.
      if (columns[3] === '0A') listening += 1;
      if (columns[3] === '01') connected += 1;
    }
  }
  return { listening, connected };
}
