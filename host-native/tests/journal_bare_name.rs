//! An agent journal named without a directory (`ada.journal`, in the working directory): its
//! lock's owner record is synced in `.`, not in the empty path, so the open succeeds, and
//! nothing of the lock is left once the journal is dropped. (One test in its own binary: it
//! changes the process's working directory.)

use mwp_host::agent_host::Journal;

#[test]
fn a_journal_named_without_a_directory_opens_and_leaves_no_owner_record() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::env::set_current_dir(dir.path()).expect("cd");
    let (journal, _) = Journal::open("ada.journal").expect("a journal in the working directory");
    assert!(
        dir.path().join("ada.journal.LOCK.pid").exists(),
        "the owner record"
    );
    let e = Journal::open("ada.journal").expect_err("held");
    assert!(e.message.contains("is in use by another writer"), "{e}");
    drop(journal);
    assert!(
        !dir.path().join("ada.journal.LOCK.pid").exists(),
        "a clean close removes the owner record"
    );
    drop(Journal::open("ada.journal").expect("open again"));
}
