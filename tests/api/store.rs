//! The store against sqlx's per-test SQLite databases.

use perfcast::hw::{GpuRef, Link, SystemSpec};
use perfcast::store::{Store, StoreError};
use sqlx::SqlitePool;

fn spec(name: &str) -> SystemSpec {
    SystemSpec {
        name: name.into(),
        gpu: GpuRef::Name("L4".into()),
        gpus_per_node: 2,
        nodes: 3,
        intra_node: Link::new("pcie4", 32.0, 3.0),
        inter_node: Link::new("ethernet", 12.5, 10.0),
        description: Some("lab box".into()),
    }
}

#[sqlx::test(migrations = false)]
async fn migrations_apply_and_presets_are_seeded_once(pool: SqlitePool) {
    let store = Store::from_pool(pool.clone()).await.unwrap();
    // perlmutter-a100-40g, vista-gh200, dgx-a100-80g, dgx-h100, dgx-h200, dgx-b200.
    assert_eq!(store.list_systems().await.unwrap().len(), 6);
    // Opening again (a restart) neither duplicates nor fails.
    let again = Store::from_pool(pool.clone()).await.unwrap();
    assert_eq!(again.list_systems().await.unwrap().len(), 6);
    let tables: Vec<(String,)> =
        sqlx::query_as("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'systems'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(tables.len(), 1);
}

#[sqlx::test(migrations = false)]
async fn insert_get_and_conflict(pool: SqlitePool) {
    let store = Store::from_pool(pool).await.unwrap();
    let stored = store.insert_system(&spec("lab")).await.unwrap();
    assert!(!stored.preset);
    assert_eq!(store.get_system("lab").await.unwrap().spec, spec("lab"));
    assert!(matches!(store.insert_system(&spec("lab")).await, Err(StoreError::Conflict(_))));
    assert!(matches!(store.get_system("nope").await, Err(StoreError::NotFound(_))));
    // Names are exact: a preset name can't be overwritten either.
    assert!(matches!(store.insert_system(&spec("dgx-h100")).await, Err(StoreError::Conflict(_))));
}
