//! The flag walk shared by the verbs that take `ferry run`'s options
//! besides their own (`failover`, `standby`, `verify`, `cutover`): each
//! verb matches its own flags (`--flag value` or `--flag=value`) and keeps
//! everything else for `run_args::parse`.

/// One argument as a verb sees it.
pub(super) struct Arg {
    flag: String,
    inline: Option<String>,
    raw: String,
}

impl Arg {
    /// The flag, without an inline `=value`.
    pub(super) fn flag(&self) -> &str {
        &self.flag
    }
}

/// A walk over a verb's arguments.
pub(super) struct Flags<'a> {
    args: &'a [String],
    next: usize,
    rest: Vec<String>,
}

impl<'a> Flags<'a> {
    pub(super) fn new(args: &'a [String]) -> Self {
        Flags {
            args,
            next: 0,
            rest: Vec::new(),
        }
    }

    /// The next argument; `--flag=value` is split at the first `=`.
    pub(super) fn next_arg(&mut self) -> Option<Arg> {
        let raw = self.args.get(self.next)?.clone();
        self.next += 1;
        let (flag, inline) = match raw.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (raw.clone(), None),
        };
        Some(Arg { flag, inline, raw })
    }

    /// The value of `arg`: inline, else the next argument.
    pub(super) fn value(&mut self, arg: &Arg) -> Result<String, String> {
        if let Some(v) = &arg.inline {
            return Ok(v.clone());
        }
        let v = self
            .args
            .get(self.next)
            .cloned()
            .ok_or_else(|| format!("{} needs a value", arg.flag))?;
        self.next += 1;
        Ok(v)
    }

    /// Leaves `arg` to `ferry run`'s parser.
    pub(super) fn keep(&mut self, arg: Arg) {
        self.rest.push(arg.raw);
    }

    /// The arguments left to `ferry run`'s parser, in their order.
    pub(super) fn into_rest(self) -> Vec<String> {
        self.rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_flags_take_values_inline_or_next_and_the_rest_is_kept() {
        let args: Vec<String> = [
            "--from",
            "a",
            "--x=1",
            "--job.tableName=t",
            "-p",
            "3",
            "--to",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut flags = Flags::new(&args);
        let mut own = Vec::new();
        while let Some(arg) = flags.next_arg() {
            match arg.flag() {
                "--from" | "--x" | "-p" => own.push(flags.value(&arg).unwrap()),
                "--to" => assert_eq!(flags.value(&arg).unwrap_err(), "--to needs a value"),
                _ => flags.keep(arg),
            }
        }
        assert_eq!(own, ["a", "1", "3"]);
        assert_eq!(flags.into_rest(), ["--job.tableName=t"]);
    }
}
