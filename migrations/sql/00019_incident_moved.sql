-- +goose Up
-- A guest that left an incident because it moved (a Proxmox cluster's HA recovered it, or an
-- operator migrated it, on another node) is not a guest that recovered by itself: the
-- incident of the node it left lists it as moved, with the node it runs on now (slug of the
-- proxmox-host). NULL for every other member.
ALTER TABLE incident_members ADD COLUMN moved_to text;

-- +goose Down
ALTER TABLE incident_members DROP COLUMN moved_to;
