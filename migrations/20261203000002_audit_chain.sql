-- The audit trail made complete and tamper-evident (docs/runbook.md, "The audit trail").
-- Every change is written as an intent row before it is made and an outcome row after it: a
-- Redis change cannot share a PostgreSQL transaction, so a change is never made unrecorded (at
-- worst an intent has no outcome, and the listing shows it as unfinished). The admin commands
-- (sale create, arm, rebuild, reconcile --repair, end, purge) are recorded too. Every row carries
-- an HMAC-SHA256 of itself and of the row before it, keyed with FLOODGATE_AUDIT_KEY, which
-- PostgreSQL never holds: `floodgate-booking audit verify` finds an edited or deleted row.
alter table ops_audit
    add column if not exists phase text not null default 'done'
        check (phase in ('intent', 'done', 'refused', 'failed')),
    add column if not exists intent bigint,
    add column if not exists detail jsonb not null default '{}',
    add column if not exists mac text;

-- Rows written before the chain existed are marked so; verify counts them apart.
update ops_audit set mac = 'before-chain' where mac is null;

create index if not exists ops_audit_by_intent on ops_audit (intent) where intent is not null;
