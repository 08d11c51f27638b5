/**
 * The tables of the PostgreSQL store and their migrations. Every process that opens the store
 * brings the schema up to date first, under a transaction-scoped advisory lock, so that many
 * processes starting at once migrate once and none reads a half-made schema.
 *
 * The trail's tables are append-only twice over: a trigger refuses UPDATE, DELETE and TRUNCATE
 * whoever asks (an owner, a superuser), and the privileges to do so are revoked from PUBLIC and from
 * the role that made them. A superuser can still disable a trigger: then `pipe audit verify` names
 * what was changed, since every row is sealed and chained as a file of the file store is.
 */
import type {PoolClient} from 'pg'

/** The trail's tables: rows are inserted once and never changed. */
export const APPEND_ONLY = ['pipe_run_index', 'pipe_events', 'pipe_snapshots', 'pipe_specs', 'pipe_evidence', 'pipe_features', 'pipe_ledger_log'] as const

/** One number taken by every process that migrates, so that one migrates at a time. */
const MIGRATION_LOCK = 7_202_611_270

const MIGRATIONS: string[] = [
  // 1: the records, as the file store keeps them (each body is the text of the file it would be, so
  // a copy between stores keeps every byte a seal or a bind covers).
  `
  CREATE TABLE pipe_counters (series text PRIMARY KEY, n bigint NOT NULL CHECK (n >= 0));
  CREATE TABLE pipe_runs (
    run_id text PRIMARY KEY,
    body text NOT NULL,
    parent_run text,
    holder text,
    lease_until timestamptz,
    epoch bigint NOT NULL DEFAULT 0
  );
  CREATE INDEX pipe_runs_parent ON pipe_runs (parent_run) WHERE parent_run IS NOT NULL;
  CREATE TABLE pipe_run_index (pos bigint PRIMARY KEY CHECK (pos >= 1), run_id text NOT NULL UNIQUE, line text NOT NULL);
  CREATE TABLE pipe_events (run_id text NOT NULL, n integer NOT NULL CHECK (n >= 1), line text NOT NULL, PRIMARY KEY (run_id, n));
  CREATE TABLE pipe_snapshots (run_id text NOT NULL, seq integer NOT NULL CHECK (seq >= 1), step text NOT NULL, commit_hash text NOT NULL, body text NOT NULL, PRIMARY KEY (run_id, seq));
  CREATE TABLE pipe_specs (version text PRIMARY KEY, body text NOT NULL);
  CREATE TABLE pipe_evidence (id text PRIMARY KEY, body text NOT NULL);
  CREATE TABLE pipe_features (id text PRIMARY KEY, body text NOT NULL);
  CREATE TABLE pipe_step_state (run_id text NOT NULL, step text NOT NULL, seq integer NOT NULL, body text NOT NULL, PRIMARY KEY (run_id, step, seq));
  CREATE TABLE pipe_ledger (key text PRIMARY KEY, body text NOT NULL);
  CREATE TABLE pipe_ledger_log (pos bigint PRIMARY KEY CHECK (pos >= 1), key text NOT NULL, line text NOT NULL);

  CREATE FUNCTION pipe_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    RAISE EXCEPTION 'pipe: % is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege';
  END $$;
  CREATE FUNCTION pipe_counter_forward() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP = 'DELETE' OR NEW.n < OLD.n OR NEW.series <> OLD.series THEN
      RAISE EXCEPTION 'pipe: an id counter only moves forward' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
  END $$;
  CREATE TRIGGER pipe_counters_forward BEFORE UPDATE OR DELETE ON pipe_counters FOR EACH ROW EXECUTE FUNCTION pipe_counter_forward();
  CREATE TRIGGER pipe_runs_kept BEFORE DELETE ON pipe_runs FOR EACH ROW EXECUTE FUNCTION pipe_refuse_change();
  CREATE TRIGGER pipe_runs_kept_all BEFORE TRUNCATE ON pipe_runs FOR EACH STATEMENT EXECUTE FUNCTION pipe_refuse_change();
  ${APPEND_ONLY.map(
    (table) => `
  CREATE TRIGGER ${table}_append_only BEFORE UPDATE OR DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION pipe_refuse_change();
  CREATE TRIGGER ${table}_append_only_all BEFORE TRUNCATE ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION pipe_refuse_change();
  REVOKE UPDATE, DELETE, TRUNCATE ON ${table} FROM PUBLIC;
  REVOKE UPDATE, DELETE, TRUNCATE ON ${table} FROM CURRENT_USER;`,
  ).join('')}
  REVOKE DELETE, TRUNCATE ON pipe_runs FROM PUBLIC;
  REVOKE DELETE, TRUNCATE ON pipe_runs FROM CURRENT_USER;
  `,
  // 2: the queue of runs for workers (pipe run --detach, pipe worker). A row stays until its run has
  // stopped (ended or waiting for a person), so a run whose worker died is claimed again once its
  // lease on pipe_runs runs out: the lease and epoch there, not this row, say who drives a run.
  `
  CREATE TABLE pipe_queue (
    run_id text PRIMARY KEY,
    queue text NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE INDEX pipe_queue_order ON pipe_queue (queue, enqueued_at);
  `,
  // 3: the queue a detached run belongs to, kept for its whole life (a pipe_queue row goes when the run
  // stops), so that answers, a review, a confirmation or pipe resume hand it back to the workers; and
  // a re-enqueue that lands while a worker is taking the row away (again), so the run is not dropped.
  `
  ALTER TABLE pipe_runs ADD COLUMN detached_queue text;
  ALTER TABLE pipe_queue ADD COLUMN again boolean NOT NULL DEFAULT false;
  `,
  // 4: foreach children as jobs of their own, and workspaces. A child is keyed once in the database
  // (parent run, step, seq, item), whatever crashes; a queued child names its parent's step, so the
  // step's concurrency is counted over every worker; a cancel request reaches the process that holds
  // a run at its next heartbeat or commit. A run names the workspace it needs (see
  // src/app/worker/workspace.ts), and workers say which workspaces they serve while they live.
  `
  ALTER TABLE pipe_runs ADD COLUMN child_key text UNIQUE;
  ALTER TABLE pipe_runs ADD COLUMN cancel_request text;
  ALTER TABLE pipe_runs ADD COLUMN workspace_id text;
  ALTER TABLE pipe_runs ADD COLUMN workspace_root text;
  ALTER TABLE pipe_runs ADD COLUMN workspace_sub text;
  ALTER TABLE pipe_queue ADD COLUMN parent_step text;
  ALTER TABLE pipe_queue ADD COLUMN note text;
  CREATE INDEX pipe_queue_parent_step ON pipe_queue (parent_step) WHERE parent_step IS NOT NULL;
  CREATE TABLE pipe_workers (
    id text PRIMARY KEY,
    queue text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    workspaces jsonb NOT NULL,
    alive_until timestamptz NOT NULL
  );
  `,
  // 5: a run put on a queue (new, handed back, or queued again) wakes the idle workers of that queue
  // at once, instead of at their next poll; the poll stays behind it for a notice that was missed.
  `
  CREATE FUNCTION pipe_queue_notify() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_notify('pipe_queue', NEW.queue);
    RETURN NULL;
  END $$;
  CREATE TRIGGER pipe_queue_wakes AFTER INSERT OR UPDATE OF again ON pipe_queue FOR EACH ROW EXECUTE FUNCTION pipe_queue_notify();
  `,
  // 6: run, spec and evidence ids from sequences taken inside the transaction that writes the record
  // (ids.ts): a counter row every worker updated per step was a global lock and a commit of its own.
  // The sequences start where the counter rows stand. A writer's role neither creates a day's sequence
  // nor holds privileges on sequences: the owner's functions do both (SECURITY DEFINER, pinned to
  // this schema), so the roles of docs/team.md need no new grant; at worst a role could burn numbers.
  `
  CREATE SEQUENCE IF NOT EXISTS pipe_ids_e;
  DO $$
  DECLARE c record; name text;
  BEGIN
    FOR c IN SELECT series, n FROM pipe_counters WHERE n > 0 AND (series = 'E' OR series ~ '^[RS]-[0-9]{8}$') LOOP
      name := 'pipe_ids_' || lower(replace(c.series, '-', '_'));
      EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %I', name);
      PERFORM setval(format('%I', name)::regclass, c.n);
    END LOOP;
  END $$;
  CREATE FUNCTION pipe_day_sequence(name text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$
  BEGIN
    IF name !~ '^pipe_ids_[rs]_[0-9]{8}$' THEN
      RAISE EXCEPTION 'pipe: % is not a day''s id sequence', name USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %I', name);
  EXCEPTION WHEN unique_violation OR duplicate_table THEN
    -- Made by another session at the same moment.
  END $$;
  CREATE FUNCTION pipe_next_dated(prefix text) RETURNS text LANGUAGE sql SECURITY DEFINER AS $$
    SELECT d.relname || ':' || nextval(d.oid::regclass) FROM (
      SELECT oid, relname FROM pg_class
      WHERE relkind = 'S' AND relnamespace = current_schema()::regnamespace AND relname ~ ('^pipe_ids_' || prefix || '_[0-9]{8}$')
      ORDER BY relname DESC LIMIT 1) d
  $$;
  CREATE FUNCTION pipe_next_evidence(n integer) RETURNS text[] LANGUAGE sql SECURITY DEFINER AS $$
    SELECT ARRAY(SELECT nextval('pipe_ids_e')::text FROM generate_series(1, n))
  $$;
  DO $$
  BEGIN
    EXECUTE format('ALTER FUNCTION pipe_day_sequence(text) SET search_path = %I', current_schema());
    EXECUTE format('ALTER FUNCTION pipe_next_dated(text) SET search_path = %I', current_schema());
    EXECUTE format('ALTER FUNCTION pipe_next_evidence(integer) SET search_path = %I', current_schema());
  END $$;
  -- Only the roles the owner grants them to (docs/team.md: the writers), not every role (PUBLIC's default).
  REVOKE EXECUTE ON FUNCTION pipe_day_sequence(text), pipe_next_dated(text), pipe_next_evidence(integer) FROM PUBLIC;
  `,
  // 7: pipe store archive. A run that left the store for an archive is anchored in the run index
  // first (a line of its own, run_id 'archived:RUN', chained like every other); only then may its
  // run row, timeline and snapshots be deleted, and only those: the trigger still refuses every
  // other change, and every change to a run that has no anchor. The privilege stays revoked: the
  // archive's own transaction grants it to the owner and revokes it again before it commits
  // (./archive.ts), so no session ever sees it held; audit verify proves what left against the anchor.
  `
  CREATE FUNCTION pipe_refuse_unless_archived() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM pipe_run_index WHERE run_id = 'archived:' || OLD.run_id) THEN
      RETURN OLD;
    END IF;
    RAISE EXCEPTION 'pipe: % is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege';
  END $$;
  DO $$
  BEGIN
    EXECUTE format('ALTER FUNCTION pipe_refuse_unless_archived() SET search_path = %I', current_schema());
  END $$;
  DROP TRIGGER pipe_runs_kept ON pipe_runs;
  CREATE TRIGGER pipe_runs_kept BEFORE DELETE ON pipe_runs FOR EACH ROW EXECUTE FUNCTION pipe_refuse_unless_archived();
  DROP TRIGGER pipe_events_append_only ON pipe_events;
  CREATE TRIGGER pipe_events_append_only BEFORE UPDATE OR DELETE ON pipe_events FOR EACH ROW EXECUTE FUNCTION pipe_refuse_unless_archived();
  DROP TRIGGER pipe_snapshots_append_only ON pipe_snapshots;
  CREATE TRIGGER pipe_snapshots_append_only BEFORE UPDATE OR DELETE ON pipe_snapshots FOR EACH ROW EXECUTE FUNCTION pipe_refuse_unless_archived();
  `,
  // 8: each slot of a pipeline's schedule fires once, whichever workers look (src/app/schedules/):
  // the firing's row is inserted in the transaction that queues its run, and its key is the primary key.
  `
  CREATE TABLE pipe_schedule_firings (
    schedule text NOT NULL,
    slot timestamptz NOT NULL,
    run_id text NOT NULL,
    fired_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (schedule, slot)
  );
  `,
  // 9: budget holds (holds.ts): what each running step has spent and has under way against the
  // budgets it counts toward, until its snapshot records it; a row counts only under the lease
  // (epoch) it was put under. Not part of the trail: rows change and go.
  `
  CREATE TABLE pipe_budget_holds (
    run_id text NOT NULL,
    step text NOT NULL,
    seq integer NOT NULL,
    keys text[] NOT NULL,
    tokens bigint NOT NULL,
    usd numeric NOT NULL,
    epoch bigint NOT NULL,
    PRIMARY KEY (run_id, step, seq)
  );
  CREATE INDEX pipe_budget_holds_keys ON pipe_budget_holds USING gin (keys);
  `,
]

/** The schema version this pipe writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length

/** Brings the schema up to date (see the top of this file); refuses a database a newer pipe migrated. */
export async function migrate(client: PoolClient): Promise<void> {
  // A store already at this version needs nothing made: checked without CREATE, so a role that may
  // only read (an auditor's, pipe view's) opens it.
  // One round trip on every open (each `pipe run --detach` opens the store): a database without the
  // table yet says so as 42P01, and is made below.
  try {
    const {rows: found} = await client.query<{version: number | null}>('SELECT max(version) AS version FROM pipe_schema')
    if (found[0]?.version === SCHEMA_VERSION) return
  } catch (error) {
    if ((error as {code?: string}).code !== '42P01') throw error
  }
  await client.query('BEGIN')
  try {
    // Waiting for another process's migration is no stalled holder: no lock_timeout here (store.ts connect).
    await client.query('SET LOCAL lock_timeout = 0')
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
    await client.query('CREATE TABLE IF NOT EXISTS pipe_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())')
    const {rows} = await client.query<{version: number | null}>('SELECT max(version) AS version FROM pipe_schema')
    const current = rows[0]?.version ?? 0
    if (current > SCHEMA_VERSION)
      throw Object.assign(new Error(`the database holds pipe schema version ${current}, newer than this pipe's ${SCHEMA_VERSION}`), {newer: true})
    for (let version = current + 1; version <= SCHEMA_VERSION; version++) {
      await client.query(MIGRATIONS[version - 1]!)
      await client.query('INSERT INTO pipe_schema (version) VALUES ($1)', [version])
    }
    await client.query('COMMIT')
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined)
    throw error
  }
}
