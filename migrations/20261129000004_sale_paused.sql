-- An operator paused admission for this sale (the ops API); kept here so a restart keeps it.
alter table sales add column paused boolean not null default false;
