//! JSON output: the whole report (summaries, comparisons, raw primary values), pretty-printed.

use super::{Render, RenderError};
use crate::report::Report;

pub struct JsonRender;

impl Render for JsonRender {
    fn render(&self, report: &Report) -> Result<String, RenderError> {
        let mut s = serde_json::to_string_pretty(report).map_err(|e| RenderError {
            format: "json",
            message: e.to_string(),
        })?;
        s.push('\n');
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_through_serde_value() {
        let r = super::super::tests::sample_report();
        let v: serde_json::Value = serde_json::from_str(&JsonRender.render(&r).unwrap()).unwrap();
        assert_eq!(v["workloads"][0]["knee"]["label"], "50us");
        assert_eq!(
            v["workloads"][0]["rows"][1]["comparison"]["outcome"],
            "better"
        );
        assert_eq!(v["workloads"][0]["rows"][0]["primary"]["n"], 5);
    }
}
