//! Smoke: block_on, spawn from tasks, join.
use lagom::Runtime;

#[test]
fn block_on_spawn_join() {
    let rt = Runtime::builder().build().unwrap();
    let v = rt.block_on(|| {
        let hs: Vec<_> = (0..100u64)
            .map(|i| lagom::task::spawn(move || i * 2))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    assert_eq!(v, 9900);
    let st = rt.shutdown();
    println!("{st}");
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.live_stacks, 0);
}
