-- The catalog: what is for sale, and each sale's settings.
-- Written by `floodgate-booking sale create`; read when a sale is armed. Redis holds the live
-- copy of a sale's settings from arming on; this is the copy that survives a restart.

create table trains (
    id text primary key,                    -- train number, e.g. '12951'
    name text not null,
    origin text not null,                   -- station code, e.g. 'MMCT'
    destination text not null,
    departs text not null,                  -- local departure time 'HH:MM', for display only
    arrives text not null,
    constraint trains_id_format check (id ~ '^[A-Za-z0-9._-]{1,64}$')
);

create table seat_classes (
    code text primary key,                  -- e.g. '3A', 'SL'
    name text not null
);

create table sales (
    id text primary key,                    -- e.g. 'tatkal-2026-12-01'
    name text not null,
    opens_at timestamptz not null,          -- the instant admission starts
    -- How long a reservation is held for payment. Long enough for a card payment with 3-D Secure
    -- on a slow phone; short enough that an abandoned hold returns its seat within minutes.
    hold_ttl_secs integer not null,
    -- How long an admission token may be used. The admitted user must pick a class and submit;
    -- an unused token then frees its place in the active-user cap.
    token_ttl_secs integer not null,
    max_seats_per_booking integer not null,
    admission_rate double precision not null, -- tickets admitted per second, across all gateways
    active_cap integer not null,             -- most admitted users with a live token or hold
    armed_at timestamptz,                    -- last successful arming; null until armed
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    constraint sales_id_format check (id ~ '^[A-Za-z0-9._-]{1,64}$'),
    constraint sales_hold_ttl_positive check (hold_ttl_secs > 0),
    constraint sales_token_ttl_positive check (token_ttl_secs > 0),
    constraint sales_max_seats_range check (max_seats_per_booking between 1 and 16),
    constraint sales_admission_rate_positive check (admission_rate > 0),
    constraint sales_active_cap_positive check (active_cap > 0)
);

-- One inventory counter: train + date + class + quota, with a capacity.
create table pools (
    sale_id text not null,
    id text not null,                       -- unique within the sale, e.g. '12951-2026-12-01-3A-GN'
    train_id text not null,
    travel_date date not null,
    class_code text not null,
    quota text not null default 'GN',       -- 'GN' general, 'TQ' tatkal, ...
    capacity integer not null,
    fare_minor bigint not null,             -- fare per seat in the currency's minor unit (paise)
    currency text not null default 'INR',
    constraint pools_pkey primary key (sale_id, id),
    constraint pools_sale_fkey foreign key (sale_id) references sales (id) on delete cascade,
    constraint pools_train_fkey foreign key (train_id) references trains (id),
    constraint pools_class_fkey foreign key (class_code) references seat_classes (code),
    constraint pools_id_format check (id ~ '^[A-Za-z0-9._-]{1,64}$'),
    constraint pools_capacity_positive check (capacity > 0),
    constraint pools_fare_nonnegative check (fare_minor >= 0)
);
