import type {ServerResponse} from 'node:http'

/**
 * Answers with `head` and then a body that does not end: 64 KiB chunks while the socket takes them,
 * waiting for drain otherwise, until the client closes the connection (or `budget` bytes, so that
 * a client that never stops reading cannot eat the machine's memory). `closed` gets the bytes sent
 * once the connection has closed.
 */
export function sendWithoutEnd(
  res: ServerResponse,
  options: {status?: number; headers?: Record<string, string>; head: string; budget?: number; closed: (bytes: number) => void},
): void {
  const chunk = Buffer.alloc(64 * 1024, 'a')
  const budget = options.budget ?? Number.POSITIVE_INFINITY
  let bytes = 0
  let open = true
  res.on('close', () => {
    open = false
    options.closed(bytes)
  })
  res.writeHead(options.status ?? 200, {'content-type': 'application/json', ...options.headers})
  res.write(options.head)
  const more = (): void => {
    while (open && bytes < budget) {
      bytes += chunk.length
      if (!res.write(chunk)) {
        res.once('drain', more)
        return
      }
    }
  }
  more()
}
