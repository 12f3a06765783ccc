//! `--baseline`: the same tables as absolute and relative differences against another trace.
//! Rows are matched on their key columns; each numeric column becomes `X`, `X_base`,
//! `X_diff` (X − base) and `X_rel_pct` ((X − base) / base × 100).

use crate::table::{Cell, Table};

/// One table compared with its baseline counterpart (same name).
pub fn diff(cur: &Table, base: &Table) -> Table {
    let num_cols: Vec<usize> = (cur.keys..cur.columns.len())
        .filter(|&c| {
            cur.rows
                .iter()
                .chain(&base.rows)
                .any(|r| r.get(c).and_then(Cell::num).is_some())
        })
        .collect();
    let mut cols: Vec<String> = cur.columns[..cur.keys].to_vec();
    for &c in &num_cols {
        let n = &cur.columns[c];
        cols.extend([
            n.clone(),
            format!("{n}_base"),
            format!("{n}_diff"),
            format!("{n}_rel_pct"),
        ]);
    }
    let mut t = Table {
        name: format!("{}_vs_baseline", cur.name),
        title: format!("{} — vs baseline", cur.title),
        columns: cols,
        keys: cur.keys,
        rows: Vec::new(),
    };
    let key =
        |r: &Vec<Cell>, k: usize| -> Vec<String> { r.iter().take(k).map(|c| c.text(6)).collect() };
    let mut seen = Vec::new();
    let emit = |a: Option<&Vec<Cell>>, b: Option<&Vec<Cell>>, t: &mut Table| {
        let keyrow = a.or(b).expect("one side");
        let mut row: Vec<Cell> = keyrow[..cur.keys].to_vec();
        for &c in &num_cols {
            let x = a.and_then(|r| r.get(c)).and_then(Cell::num);
            let y = b.and_then(|r| r.get(c)).and_then(Cell::num);
            row.push(x.into());
            row.push(y.into());
            row.push(match (x, y) {
                (Some(x), Some(y)) => Cell::Float(x - y),
                _ => Cell::Empty,
            });
            row.push(match (x, y) {
                (Some(x), Some(y)) if y != 0.0 => Cell::Float((x - y) / y.abs() * 100.0),
                _ => Cell::Empty,
            });
        }
        t.rows.push(row);
    };
    for r in &cur.rows {
        let k = key(r, cur.keys);
        let b = base.rows.iter().find(|b| key(b, base.keys) == k);
        if b.is_some() {
            seen.push(k);
        }
        emit(Some(r), b, &mut t);
    }
    for b in &base.rows {
        if !seen.contains(&key(b, base.keys)) {
            emit(None, Some(b), &mut t);
        }
    }
    t
}

/// All tables of `cur` that `base` has too, as differences.
pub fn diff_all(cur: &[Table], base: &[Table]) -> Vec<Table> {
    cur.iter()
        .filter_map(|c| base.iter().find(|b| b.name == c.name).map(|b| diff(c, b)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn differences_by_key() {
        let mut a = Table::new("t", "T", &["cpu", "src", "ms"], 1);
        a.row(vec![0u32.into(), "x".into(), 15.0.into()]);
        a.row(vec![1u32.into(), "x".into(), 5.0.into()]);
        let mut b = Table::new("t", "T", &["cpu", "src", "ms"], 1);
        b.row(vec![0u32.into(), "y".into(), 10.0.into()]);
        b.row(vec![2u32.into(), "y".into(), 1.0.into()]);
        let d = diff(&a, &b);
        assert_eq!(d.columns, ["cpu", "ms", "ms_base", "ms_diff", "ms_rel_pct"]);
        assert_eq!(
            d.rows[0],
            vec![
                Cell::Int(0),
                15.0.into(),
                10.0.into(),
                5.0.into(),
                50.0.into()
            ]
        );
        assert_eq!(d.rows[1][2], Cell::Empty);
        assert_eq!(d.rows[2][0], Cell::Int(2));
        assert_eq!(d.rows[2][1], Cell::Empty);
    }
}
