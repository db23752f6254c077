//! The core's CPU time, read from `/proc/PID/stat`.

/// A process's CPU time (user + system) from the text of its
/// `/proc/PID/stat`, in clock ticks: fields 14 and 15, counted after the
/// parenthesised command name (which may hold spaces and parentheses).
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` starts at field 3 (the state).
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    user.checked_add(system)
}

/// Clock ticks per second of `/proc/PID/stat` (`USER_HZ`, 100 on Linux).
pub const TICKS_PER_SECOND: f64 = 100.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU fields are found after the command name, whatever it holds.
    #[test]
    fn cpu_ticks_are_user_plus_system() {
        let stat = "1234 (wanopt core) S 1 1234 1234 0 -1 4194560 500 0 0 0 \
                    250 75 0 0 20 0 9 0 100 200000000 3000 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(325));
        let odd = "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 11 22 0 0";
        assert_eq!(cpu_ticks(odd), Some(33));
        assert_eq!(cpu_ticks("garbage"), None);
        assert_eq!(cpu_ticks("1 (x) S 1 2"), None);
        assert_eq!(cpu_ticks(""), None);
    }
}
