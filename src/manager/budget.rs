//! The issuance budget's flags: at most N signs per second per issuer (see
//! [`crate::controllers::signing::budget`]).

use clap::Args;

use crate::controllers::kit::rate::{Rate, Settings};

#[derive(Debug, Default, Args)]
pub struct BudgetArgs {
    /// The most signs per second each Issuer or ClusterIssuer sends its CA (e.g. 5, 0.5), so a
    /// mass re-issue (a first install, a CA rotation, renewals falling together) never floods
    /// it; requests beyond it wait, soonest expiry first. Unset: unlimited.
    #[arg(long, value_name = "SIGNS_PER_SECOND")]
    pub issuance_budget: Option<Rate>,
    /// Signs an issuer may send at once after a quiet spell (the token bucket's size); with
    /// the default 1, no second holds more than the budget plus one.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub issuance_budget_burst: u32,
}

impl BudgetArgs {
    /// The controllers' setting: `None` (unlimited) without `--issuance-budget`.
    pub fn settings(&self) -> Option<Settings> {
        self.issuance_budget.map(|rate| Settings {
            rate,
            burst: self.issuance_budget_burst,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        budget: BudgetArgs,
    }

    #[test]
    fn budget_flags() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("cfssl-issuer").chain(args.iter().copied()))
                .map(|cli| cli.budget.settings())
                .map_err(|e| e.kind())
        };
        let five = |burst| Settings {
            rate: Rate::per_second(5),
            burst,
        };
        let cases: [(&[&str], _); 6] = [
            (&[], Ok(None)),
            (&["--issuance-budget=5"], Ok(Some(five(1)))),
            (
                &["--issuance-budget=5", "--issuance-budget-burst=10"],
                Ok(Some(five(10))),
            ),
            (&["--issuance-budget-burst=3"], Ok(None)),
            (
                &["--issuance-budget=0"],
                Err(clap::error::ErrorKind::ValueValidation),
            ),
            (
                &["--issuance-budget=5", "--issuance-budget-burst=0"],
                Err(clap::error::ErrorKind::ValueValidation),
            ),
        ];
        for (args, want) in cases {
            assert_eq!(parse(args), want, "{args:?}");
        }
    }
}
