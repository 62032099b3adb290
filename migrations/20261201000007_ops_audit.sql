-- Every change an operator makes through the ops API (rate, cap, bot check, pause, resume,
-- open-now): who (the ops token's name, never the token), when, and the sale's settings before
-- and after. Append-only: nothing updates or deletes a row.
create table if not exists ops_audit (
    id bigserial primary key,
    at timestamptz not null default now(),
    sale text not null,
    action text not null,
    actor text not null,
    before jsonb not null,
    after jsonb not null
);

create index if not exists ops_audit_by_sale on ops_audit (sale, id desc);
