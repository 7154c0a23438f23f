-- 004: a registration keeps the identities (st_dev, st_ino) of the store file
-- it opened and of the lock file whose byte it holds, and the pid namespace of
-- its process. A lock file deleted or replaced while processes run, or a store
-- file copied elsewhere with its registrations, then makes no live process
-- look dead (its byte is in another lock file: its pid tells) and keeps no
-- process of another file alive (see _identity.Here.alive). Registrations of
-- an earlier version have none, and are tested in the lock file beside the name.
ALTER TABLE tinystore_processes ADD COLUMN file_dev INTEGER;
ALTER TABLE tinystore_processes ADD COLUMN file_ino INTEGER;
ALTER TABLE tinystore_processes ADD COLUMN lock_dev INTEGER;
ALTER TABLE tinystore_processes ADD COLUMN lock_ino INTEGER;
ALTER TABLE tinystore_processes ADD COLUMN pid_ns TEXT;
