//! Runs a transcript file on the memory host and prints its output lines.
fn main() {
    let path = std::env::args().nth(1).expect("usage: run_transcript FILE");
    let text = std::fs::read_to_string(path).expect("readable file");
    let (lines, failed) = mwp_core::transcript::run_in_memory(&text);
    for l in lines {
        println!("{l}");
    }
    std::process::exit(i32::from(failed));
}
