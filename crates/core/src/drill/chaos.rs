//! Chaos drills' schedule: random drills from a catalog at an average rate, as a seeded
//! sequence of arrivals (a Poisson process: exponential gaps), so a run can be repeated. Pure:
//! the runner decides when an arrival waits for its object (at most one drill open per object).

use std::time::Duration;

/// A rate (`2/m`) that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--rate {text:?}: {why} (a count per second, minute or hour: 2/m, 30/h, 0.5/s)")]
pub struct RateError {
    text: String,
    why: &'static str,
}

/// Arrivals per second for `N/s`, `N/m` or `N/h` (`N` a positive number).
pub fn parse_rate(text: &str) -> Result<f64, RateError> {
    let error = |why| RateError {
        text: text.to_string(),
        why,
    };
    let (count, unit) = text.trim().split_once('/').ok_or(error("no unit"))?;
    let count: f64 = count
        .trim()
        .parse()
        .map_err(|_| error("the count is not a number"))?;
    if !(count.is_finite() && count > 0.0) {
        return Err(error("the count must be more than 0"));
    }
    let seconds = match unit.trim() {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(error("the unit is not s, m or h")),
    };
    let rate = count / seconds;
    // More than 100 a second would be a load test, not drills (and gaps below a millisecond).
    if rate > 100.0 {
        return Err(error("more than 100 drills a second"));
    }
    Ok(rate)
}

/// Most drills one chaos run may ask for (`--rate` × `--duration`, on average): more is a load
/// test, and its schedule alone would be gigabytes.
pub const MAX_DRILLS: f64 = 100_000.0;

/// Why a rate and a duration make no chaos run, if they do not.
pub fn check_size(per_second: f64, duration: Duration) -> Result<(), String> {
    let expected = per_second * duration.as_secs_f64();
    if expected > MAX_DRILLS {
        return Err(format!(
            "--rate and --duration ask for about {expected:.0} drills; a chaos run takes at most \
             {MAX_DRILLS:.0}"
        ));
    }
    Ok(())
}

/// One drill to start, `at` after the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// When, from the start (whole milliseconds).
    pub at: Duration,
    /// The drill's index in the catalog.
    pub drill: usize,
}

/// The arrivals of a run of `duration` at `per_second` on `drills` drills, from `seed`: the same
/// seed gives the same sequence.
pub fn schedule(seed: u64, per_second: f64, duration: Duration, drills: usize) -> Vec<Arrival> {
    let mut arrivals = Vec::new();
    if drills == 0 || per_second <= 0.0 {
        return arrivals;
    }
    let mut random = SplitMix64(seed);
    let mut at = 0.0_f64;
    let end = duration.as_secs_f64();
    loop {
        // Exponential gap: -ln(U) / rate with U in (0, 1].
        let uniform = ((random.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        at += -uniform.ln() / per_second;
        if at >= end {
            return arrivals;
        }
        // A bound on the schedule whatever the caller checked (the Poisson count's tail).
        if arrivals.len() as f64 >= 2.0 * MAX_DRILLS {
            return arrivals;
        }
        let drill = (random.next() % drills as u64) as usize;
        arrivals.push(Arrival {
            at: Duration::from_millis((at * 1000.0) as u64),
            drill,
        });
    }
}

/// SplitMix64 (Steele, Lea and Flood, 2014), written out so that a seed gives the same drills
/// for as long as this file says so, whatever a random-number crate's next version does.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_gives_its_published_sequence() {
        // The reference implementation's first outputs for seed 1234567.
        let mut random = SplitMix64(1_234_567);
        let first: Vec<u64> = (0..3).map(|_| random.next()).collect();
        assert_eq!(
            first,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
    }

    #[test]
    fn a_seed_gives_one_sequence_and_the_rate_is_kept_on_average() {
        let one = schedule(42, 2.0 / 60.0, Duration::from_secs(3600 * 10), 5);
        assert_eq!(
            one,
            schedule(42, 2.0 / 60.0, Duration::from_secs(3600 * 10), 5)
        );
        assert_ne!(
            one,
            schedule(43, 2.0 / 60.0, Duration::from_secs(3600 * 10), 5)
        );
        // 1,200 expected in ten hours; a Poisson count's deviation is about 35.
        assert!((1_050..1_350).contains(&one.len()), "{}", one.len());
        assert!(one.windows(2).all(|pair| pair[0].at <= pair[1].at));
        assert!(one.iter().all(|arrival| arrival.drill < 5));
        for drill in 0..5 {
            let count = one.iter().filter(|arrival| arrival.drill == drill).count();
            assert!((150..330).contains(&count), "drill {drill}: {count}");
        }
        assert!(schedule(1, 1.0, Duration::from_secs(10), 0).is_empty());
        assert!(check_size(2.0 / 60.0, Duration::from_secs(8 * 3600)).is_ok());
        let error = check_size(100.0, Duration::from_secs(1000 * 3600)).unwrap_err();
        assert!(error.contains("360000000 drills"), "{error}");
    }

    #[test]
    fn rates_parse_with_their_unit_and_bad_ones_say_why() {
        assert_eq!(parse_rate("2/m"), Ok(2.0 / 60.0));
        assert_eq!(parse_rate("30/h"), Ok(30.0 / 3600.0));
        assert_eq!(parse_rate("0.5/s"), Ok(0.5));
        for (text, why) in [
            ("2", "no unit"),
            ("x/m", "not a number"),
            ("0/m", "more than 0"),
            ("-1/m", "more than 0"),
            ("2/d", "not s, m or h"),
            ("1000/s", "100"),
            ("NaN/m", "more than 0"),
        ] {
            let error = parse_rate(text).unwrap_err().to_string();
            assert!(
                error.contains(why) && error.contains(text),
                "{text}: {error}"
            );
        }
    }
}
