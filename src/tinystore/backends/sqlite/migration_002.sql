-- 002: tinystore_sequence holds a floor of job seqs, not the last one handed
-- out. A new job's seq is above every job kept and above the floor, which
-- removing the newest jobs raises, so seqs are still never reused; adds made
-- by the store's own writer write no counter. The column is renamed so that a
-- process of an earlier version, which reserved seqs from `last` alone, fails
-- loudly on this file rather than handing out seqs again.
ALTER TABLE tinystore_sequence RENAME COLUMN last TO floor;
