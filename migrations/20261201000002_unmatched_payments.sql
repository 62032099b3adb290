-- Money the payment provider reported for something this service cannot sell: a reference that
-- names no reservation it ever issued (or nothing parseable at all). Such a payment is refunded
-- at once and recorded here, so finance can reconcile the provider's statement; it is never
-- acknowledged and forgotten. Written by the booking service's webhook (booking/src/webhook.rs),
-- once per payment.
create table unmatched_payments (
    payment_id text not null,
    -- The provider's event that reported it (the first one, if it was redelivered).
    event_id text not null,
    -- What the payment named as its reservation, as received.
    reference text not null,
    sale_id text not null,
    amount_minor bigint not null,
    currency text not null,
    -- `unknown_reservation` (a well-formed id no pool holds) or `unknown_reference`.
    reason text not null,
    received_at timestamptz not null default now(),
    -- When the refund was asked of the provider; null until the provider accepted the request.
    refund_requested_at timestamptz,
    constraint unmatched_payments_pkey primary key (payment_id)
);
