-- The bounds every entry point checks (contract/src/settings.rs), kept by the catalog too, so a
-- row written by hand cannot hand the admission controller a rate it cannot pace by, or give a
-- token a lifetime its claim record does not cover. `not valid`: rows from before are checked
-- when they are armed (catalog.rs) rather than failing this migration.
alter table sales add constraint sales_admission_rate_range
  check (admission_rate >= 0.001 and admission_rate <= 1000000) not valid;
alter table sales add constraint sales_token_ttl_range
  check (token_ttl_secs between 1 and 3600) not valid;
