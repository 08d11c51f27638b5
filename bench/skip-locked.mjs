#!/usr/bin/env node
// The machine's own ceiling for a PostgreSQL job queue (bench section `team`): one process of a
// `FOR UPDATE SKIP LOCKED` job loop, as graphile-worker's getJob does it, each job claimed and marked
// done in one transaction (one WAL flush, fsync on). The section starts as many of these as pipe
// workers, on a table of jobs it filled, and reads the rate from the rows' commit timestamps.
//   node bench/skip-locked.mjs URL PG_MODULE_PATH
const [url, pgPath] = process.argv.slice(2)
const pg = (await import(pgPath)).default
const client = new pg.Client({connectionString: url})
await client.connect()
let done = 0
for (;;) {
  await client.query('BEGIN')
  const job = (await client.query('SELECT id FROM bench_jobs WHERE done_at IS NULL ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED')).rows[0]
  if (!job) {
    await client.query('COMMIT')
    break
  }
  await client.query('UPDATE bench_jobs SET done_at = clock_timestamp() WHERE id = $1', [job.id])
  await client.query('COMMIT')
  done++
}
await client.end()
console.log(JSON.stringify({done}))
