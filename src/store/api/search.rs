//! Full-text search (`store/search/`).

use crate::model::ids::SessionId;
use crate::store::search::run;
use crate::store::search::{SearchHit, SearchRequest};
use crate::store::{Result, SessionStore};

impl SessionStore {
    /// Runs a full-text search: the most recent matching documents that pass the filters,
    /// ranked by bm25 with a recency boost (`store::search::run::search`).
    pub fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>> {
        self.read(|db| run::search(db, request))
    }

    /// Whether an entry (by seq) lies on its session's active path.
    pub fn on_active_path(&self, session: &SessionId, seq: i64) -> Result<bool> {
        self.read(|db| run::on_active_path(db, session, seq))
    }
}
