-- 0006: derived path state for 1.6.0 sessions (rebuilt from the entries after this migration).
--
-- `entry_path.system_seq`: the last `message` entry with a system message on the path
-- (inclusive). The system messages of a branch form a chain — a system message's previous one
-- is its parent's `system_seq` — so the branch's prompt and tool loadout replay in
-- O(system messages), however long the history.
--
-- `context_edits`: one row per `context_edit` entry (its target id), so that a search hit can
-- say whether an edit on the active branch removed or replaced it in the model context.
ALTER TABLE entry_path ADD COLUMN system_seq INTEGER;

-- `entry_path.flags`: what a context rebuild would otherwise parse each message for — bit 0:
-- a system message; bit 1: a message without content (null or absent), which the context
-- gives `""` or `[]`. The rebuild then reads each message's bytes once.
ALTER TABLE entry_path ADD COLUMN flags INTEGER NOT NULL DEFAULT 0;

-- `usage` rows now also stand for entries that carry usage without being messages (1.6.0:
-- `usage` entries, compaction and branch summaries with the usage of their summary request;
-- `role` is then the entry type, `is_message` 0), and count an assistant message's tool calls.
-- The session's totals add up every row, as 1.6.0's `getSessionStats` adds up every entry.
ALTER TABLE usage ADD COLUMN is_message INTEGER NOT NULL DEFAULT 1;
ALTER TABLE usage ADD COLUMN tool_calls INTEGER NOT NULL DEFAULT 0;

CREATE TABLE context_edits (
    sid       INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    target_id TEXT,
    -- 1: `replacement: null` (the target leaves the context); 0: its content is replaced.
    omits     INTEGER NOT NULL,
    PRIMARY KEY (sid, seq)
) WITHOUT ROWID;

CREATE INDEX context_edits_target ON context_edits (sid, target_id, seq);
