//! `scope_borrow`: tasks that borrow from the caller's stack, with no `Arc` and no `'static`.
//! `Runtime::scope` splits a slice of words among tasks that each count their chunk in place,
//! and `lagom::join` sums a slice by halves, recursively: each side may block, and both have
//! ended before the borrow does.
//!
//! ```text
//! cargo run --release --example scope_borrow -- [--words N] [--chunks N]
//! ```

use lagom::Runtime;
use lagom_examples::usage_error;

const USAGE: &str = "usage: scope_borrow [--words N] [--chunks N]
Counts words by length in chunks of a borrowed Vec (Runtime::scope), then sums their lengths by
recursive lagom::join, and prints both.
  --words N   words in the text (default 200000)
  --chunks N  scoped tasks, at least 1 (default 8)";

/// The most words `--words` asks for: the text is built in memory first.
const MAX_WORDS: usize = 100_000_000;
/// The most chunks `--chunks` asks for: one scoped task each.
const MAX_CHUNKS: usize = 1_000_000;

fn parse_args() -> Result<(usize, usize), lexopt::Error> {
    use lexopt::prelude::*;
    let (mut words, mut chunks) = (200_000, 8);
    let mut p = lexopt::Parser::from_env();
    while let Some(arg) = p.next()? {
        match arg {
            Long("words") => words = p.value()?.parse()?,
            Long("chunks") => chunks = p.value()?.parse()?,
            Short('h') | Long("help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(arg.unexpected()),
        }
    }
    if chunks == 0 || chunks > MAX_CHUNKS {
        return Err(format!("--chunks {chunks}: from 1 to {MAX_CHUNKS} (a task each)").into());
    }
    if words > MAX_WORDS {
        return Err(
            format!("--words {words}: at most {MAX_WORDS} (each is built in memory)").into(),
        );
    }
    Ok((words, chunks))
}

/// The sum of the lengths of `words`, by halves in two tasks down to 1 000 words.
fn total_len(words: &[String]) -> usize {
    if words.len() <= 1_000 {
        return words.iter().map(String::len).sum();
    }
    let (a, b) = words.split_at(words.len() / 2);
    let (x, y) = lagom::join(|| total_len(a), || total_len(b));
    x + y
}

fn main() {
    let (n, chunks) = parse_args().unwrap_or_else(|e| usage_error(e, USAGE));
    let rt = Runtime::builder()
        .build()
        .unwrap_or_else(|e| usage_error(e, USAGE));
    // The data lives on main's stack; the tasks below borrow it.
    let words: Vec<String> = (0..n).map(|i| "lagom".repeat(1 + i % 4)).collect();
    let per_chunk = words.len().div_ceil(chunks).max(1);
    let by_len: [usize; 4] = rt.scope(|s| {
        let handles: Vec<_> = words
            .chunks(per_chunk)
            .map(|chunk| {
                s.spawn(move || {
                    let mut counts = [0; 4];
                    chunk.iter().for_each(|w| counts[w.len() / 5 - 1] += 1);
                    counts
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold([0; 4], |mut acc, c| {
                acc.iter_mut().zip(c).for_each(|(a, c)| *a += c);
                acc
            })
    });
    // lagom::join runs inside a task: here a scoped one, which may borrow `words` too.
    let total = rt.scope(|s| s.spawn(|| total_len(&words)).join().unwrap());
    assert_eq!(by_len.iter().sum::<usize>(), words.len());
    assert_eq!(total, (1..=4).map(|k| by_len[k - 1] * 5 * k).sum::<usize>());
    println!(
        "{} words by length 5/10/15/20: {by_len:?}; {total} letters in all",
        words.len()
    );
}
