//! The feature set: names, defaults, parsing and printing.

use lagom_policy::{Feature, Features, UnknownFeature};

/// Every set prints in the `NAME,NO_NAME,…` syntax and parses back to itself: the defaults,
/// the empty set, every single-feature toggle, and a spread of mixed sets.
#[test]
fn features_round_trip_through_display_and_parse() {
    let mut sets = vec![Features::DEFAULT, Features::NONE];
    for f in Feature::ALL {
        sets.push(Features::DEFAULT.with(f, !Features::DEFAULT.is_enabled(f)));
    }
    for bits in [0x2_a5a5u32, 0x1_5a5a, 0x3_0f0f, 0x0_f0f0] {
        let mut s = Features::NONE;
        for (i, f) in Feature::ALL.iter().enumerate() {
            s.set(*f, bits >> i & 1 == 1);
        }
        sets.push(s);
    }
    for s in sets {
        let text = s.to_string();
        assert_eq!(text.split(',').count(), Features::NAMES.len());
        assert_eq!(text.parse::<Features>().unwrap(), s, "{text}");
        assert_eq!(Features::NONE.apply(&text).unwrap(), s, "{text}");
    }
}

/// Parsing applies names on top of the kernel defaults, left to right.
#[test]
fn features_parse_on_top_of_the_defaults() {
    let f = Features::parse("NO_DELAY_DEQUEUE, NEXT_BUDDY,,TTWU_QUEUE_DELAYED").unwrap();
    assert!(!f.is_enabled(Feature::DelayDequeue));
    assert!(f.is_enabled(Feature::NextBuddy));
    assert!(f.is_enabled(Feature::TtwuQueueDelayed));
    assert!(
        f.is_enabled(Feature::PlaceLag),
        "untouched names keep their defaults"
    );
    assert_eq!(Features::parse("").unwrap(), Features::DEFAULT);
    assert_eq!(
        Features::parse("NEXT_BUDDY,NO_NEXT_BUDDY").unwrap(),
        Features::DEFAULT,
        "the last mention wins"
    );
    // Kernel defaults (the snapshot) and the RFC's defaults for its features.
    let d = Features::DEFAULT;
    for on in [
        Feature::PlaceLag,
        Feature::PlaceDeadlineInitial,
        Feature::PlaceRelDeadline,
        Feature::RunToParity,
        Feature::PreemptShort,
        Feature::PickBuddy,
        Feature::CacheHotBuddy,
        Feature::DelayDequeue,
        Feature::DelayZero,
        Feature::WakeupPreemption,
        Feature::TtwuQueue,
        Feature::TtwuQueueOnCpu,
        Feature::SisUtil,
        Feature::Itmt,
    ] {
        assert!(d.is_enabled(on), "{} defaults on", on.name());
    }
    for off in [
        Feature::NextBuddy,
        Feature::TtwuQueueDelayed,
        Feature::TtwuQueueDefault,
        Feature::TtwuDequeue,
    ] {
        assert!(!d.is_enabled(off), "{} defaults off", off.name());
    }
}

/// An unknown name (with or without `NO_`) is rejected with the name and every valid name.
#[test]
fn unknown_feature_is_rejected_with_the_valid_names() {
    for (input, name) in [
        ("DELAY_DEQUEUE,BOGUS", "BOGUS"),
        ("NO_BOGUS", "BOGUS"),
        ("delay_zero", "delay_zero"),
    ] {
        let err = input.parse::<Features>().unwrap_err();
        let UnknownFeature { name: got, valid } = &err;
        assert_eq!(got, name);
        assert_eq!(*valid, Features::NAMES);
        let msg = err.to_string();
        assert!(msg.contains(name), "{msg}");
        for n in Features::NAMES {
            assert!(msg.contains(n), "message lacks {n}: {msg}");
        }
    }
    for (i, f) in Feature::ALL.iter().enumerate() {
        assert_eq!(f.name(), Features::NAMES[i]);
        assert_eq!(Feature::from_name(f.name()), Some(*f));
    }
}
