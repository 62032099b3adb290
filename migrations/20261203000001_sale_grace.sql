-- A sale's own grace (issue 29): how long a departed client keeps its place, in seconds. Null:
-- the gateways' FLOODGATE_GRACE_MS. Sales whose buyers wait on phones, which suspend a
-- backgrounded app's socket, set it longer.
alter table sales add column if not exists grace_secs integer
    check (grace_secs is null or grace_secs between 5 and 3600);
