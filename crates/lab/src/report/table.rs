//! A report's table (DESIGN.md §4, Reports: every table of a reproduction is written as
//! markdown in the report and as CSV beside it): the columns say how each value is
//! shown in each form, the rows hold typed values, and [`Table::markdown`] and
//! [`Table::csv`] render the same rows. Rows for one form only carry what the other
//! must not: the paper's published numbers stand beside ours in the markdown, and a
//! wide markdown table may be written long in the CSV.

use std::fmt::Write as _;

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Text, shown as it is (or quoted, with [`Format::Quoted`]).
    Text(String),
    /// A whole number, shown as it is.
    Int(i128),
    /// A real number, shown by the column's format.
    Float(f64),
    /// Nothing: an empty markdown cell (`| |`), an empty CSV field.
    Empty,
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl From<&String> for Value {
    fn from(s: &String) -> Self {
        Value::Text(s.clone())
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Text(b.to_string())
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(n: $t) -> Self {
                Value::Int(i128::from(n))
            }
        }
    )*};
}
int_value!(u8, u16, u32, u64, i32, i64);

impl From<usize> for Value {
    fn from(n: usize) -> Self {
        // usize is at most 64 bits on every target Rust supports.
        Value::Int(n as i128)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Empty, Into::into)
    }
}

/// How a column shows its values in one of the two forms.
#[derive(Debug, Clone, Copy)]
pub enum Format {
    /// As Rust's `{}`: text and whole numbers as they are, real numbers in the shortest
    /// form that reads back the same (`0.5`, `50`, `NaN`).
    Plain,
    /// Real numbers with this many decimals (`{:.N}`); the rest plain.
    Fixed(usize),
    /// Real numbers through this function; the rest plain.
    Custom(fn(f64) -> String),
    /// Text between double quotes (a CSV field that may hold commas); the rest plain.
    Quoted,
}

impl Format {
    fn show(self, v: &Value) -> String {
        match (self, v) {
            (_, Value::Empty) => String::new(),
            // RFC 4180: a quote inside a quoted field is doubled.
            (Format::Quoted, Value::Text(s)) => format!("\"{}\"", s.replace('"', "\"\"")),
            (_, Value::Text(s)) => s.clone(),
            (_, Value::Int(n)) => n.to_string(),
            (Format::Fixed(d), Value::Float(x)) => format!("{x:.d$}"),
            (Format::Custom(f), Value::Float(x)) => f(*x),
            (Format::Plain | Format::Quoted, Value::Float(x)) => x.to_string(),
        }
    }
}

/// A column's alignment in markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// `---`: text.
    Left,
    /// `---:`: numbers.
    Right,
}

/// One column: where it appears, and how its values are shown there.
#[derive(Debug, Clone)]
pub struct Column {
    md: Option<String>,
    csv: Option<String>,
    align: Align,
    md_format: Format,
    csv_format: Format,
}

impl Column {
    /// A column of both forms: its markdown header and its CSV name; left-aligned,
    /// values plain.
    pub fn new(md: &str, csv: &str) -> Column {
        Column {
            md: Some(md.to_owned()),
            csv: Some(csv.to_owned()),
            align: Align::Left,
            md_format: Format::Plain,
            csv_format: Format::Plain,
        }
    }

    /// A column of the markdown only.
    pub fn md(header: &str) -> Column {
        Column {
            csv: None,
            ..Column::new(header, "")
        }
    }

    /// A column of the CSV only.
    pub fn csv(name: &str) -> Column {
        Column {
            md: None,
            ..Column::new("", name)
        }
    }

    /// Right-aligned in markdown (numbers).
    pub fn right(mut self) -> Column {
        self.align = Align::Right;
        self
    }

    /// The same format in both forms.
    pub fn format(self, f: Format) -> Column {
        self.md_format(f).csv_format(f)
    }

    /// The format in markdown.
    pub fn md_format(mut self, f: Format) -> Column {
        self.md_format = f;
        self
    }

    /// The format in CSV.
    pub fn csv_format(mut self, f: Format) -> Column {
        self.csv_format = f;
        self
    }

    /// Real numbers with `md` decimals in markdown and `csv` in CSV.
    pub fn fixed(self, md: usize, csv: usize) -> Column {
        self.md_format(Format::Fixed(md))
            .csv_format(Format::Fixed(csv))
    }
}

/// Which forms a row appears in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Only {
    Both,
    Markdown,
    Csv,
}

/// The separator line under a markdown header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// `| --- | ---: |`
    Spaced,
    /// `|---|---:|`
    Compact,
}

/// A table: its columns and rows, rendered to markdown and to CSV.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<Column>,
    rows: Vec<(Only, Vec<Value>)>,
    rule: Rule,
}

/// The values of a row, each converted to a [`Value`]: `cells![name, 3, 0.5]`.
#[macro_export]
macro_rules! cells {
    ($($v:expr),* $(,)?) => {
        vec![$($crate::report::Value::from($v)),*]
    };
}

impl Table {
    /// A table of these columns, no rows yet.
    pub fn new(columns: impl IntoIterator<Item = Column>) -> Table {
        Table {
            columns: columns.into_iter().collect(),
            rows: Vec::new(),
            rule: Rule::Spaced,
        }
    }

    /// The header's separator without spaces (`|---|---:|`).
    pub fn compact(mut self) -> Table {
        self.rule = Rule::Compact;
        self
    }

    /// A row of both forms: one value per column.
    ///
    /// # Panics
    /// If the row does not have one value per column (a bug of the report).
    pub fn row(&mut self, values: Vec<Value>) -> &mut Table {
        self.push(Only::Both, values, self.columns.len())
    }

    /// A row of the markdown only: one value per markdown column.
    ///
    /// # Panics
    /// If the row does not have one value per markdown column.
    pub fn md_row(&mut self, values: Vec<Value>) -> &mut Table {
        let n = self.columns.iter().filter(|c| c.md.is_some()).count();
        self.push(Only::Markdown, values, n)
    }

    /// A row of the CSV only: one value per CSV column.
    ///
    /// # Panics
    /// If the row does not have one value per CSV column.
    pub fn csv_row(&mut self, values: Vec<Value>) -> &mut Table {
        let n = self.columns.iter().filter(|c| c.csv.is_some()).count();
        self.push(Only::Csv, values, n)
    }

    fn push(&mut self, only: Only, values: Vec<Value>, expected: usize) -> &mut Table {
        assert_eq!(values.len(), expected, "a row of {expected} columns");
        self.rows.push((only, values));
        self
    }

    /// Appends the rows of `other`, a table of the same columns (one table per section
    /// in the markdown, one CSV of them all).
    pub fn extend(&mut self, other: Table) {
        self.rows.extend(other.rows);
    }

    /// Rows in all.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The markdown: header, separator and rows, one a line, with no newline after the
    /// last (a template puts the table on a line of its own). An empty value is an empty
    /// cell (`| |`).
    pub fn markdown(&self) -> String {
        let mut out = String::from("|");
        for c in &self.columns {
            if let Some(h) = &c.md {
                let _ = write!(out, " {h} |");
            }
        }
        out.push_str("\n|");
        for c in self.columns.iter().filter(|c| c.md.is_some()) {
            out.push_str(match (self.rule, c.align) {
                (Rule::Spaced, Align::Left) => " --- |",
                (Rule::Spaced, Align::Right) => " ---: |",
                (Rule::Compact, Align::Left) => "---|",
                (Rule::Compact, Align::Right) => "---:|",
            });
        }
        out.push('\n');
        for (only, values) in &self.rows {
            let cells: Vec<(&Column, &Value)> = match only {
                Only::Csv => continue,
                Only::Markdown => self
                    .columns
                    .iter()
                    .filter(|c| c.md.is_some())
                    .zip(values)
                    .collect(),
                Only::Both => self
                    .columns
                    .iter()
                    .zip(values)
                    .filter(|(c, _)| c.md.is_some())
                    .collect(),
            };
            out.push('|');
            for (c, v) in cells {
                if *v == Value::Empty {
                    out.push_str(" |");
                } else {
                    let _ = write!(out, " {} |", c.md_format.show(v));
                }
            }
            out.push('\n');
        }
        out.pop();
        out
    }

    /// The CSV: a header of the columns' names, then the rows, fields joined by commas.
    pub fn csv(&self) -> String {
        let names: Vec<&str> = self
            .columns
            .iter()
            .filter_map(|c| c.csv.as_deref())
            .collect();
        let mut out = names.join(",");
        out.push('\n');
        for (only, values) in &self.rows {
            let fields: Vec<String> = match only {
                Only::Markdown => continue,
                Only::Csv => self
                    .columns
                    .iter()
                    .filter(|c| c.csv.is_some())
                    .zip(values)
                    .map(|(c, v)| c.csv_format.show(v))
                    .collect(),
                Only::Both => self
                    .columns
                    .iter()
                    .zip(values)
                    .filter(|(c, _)| c.csv.is_some())
                    .map(|(c, v)| c.csv_format.show(v))
                    .collect(),
            };
            out.push_str(&fields.join(","));
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new([
            Column::new("manager", "manager"),
            Column::new("calls", "calls").right(),
            Column::new("mean ms", "mean_ms").right().fixed(3, 4),
            Column::csv("failed"),
            Column::md("note"),
        ]);
        t.md_row(cells!["paper", ">= 1000", 23.4, Value::Empty]);
        t.row(cells!["xbind T=1", 50u64, 1.23456, 0u64, "ours"]);
        t.csv_row(cells!["extra", 1u64, 2.0, 3u64]);
        t
    }

    #[test]
    fn markdown_and_csv_render_the_same_rows() {
        let t = sample();
        assert_eq!(
            t.markdown(),
            "| manager | calls | mean ms | note |\n| --- | ---: | ---: | --- |\n\
             | paper | >= 1000 | 23.400 | |\n| xbind T=1 | 50 | 1.235 | ours |"
        );
        assert_eq!(
            t.csv(),
            "manager,calls,mean_ms,failed\nxbind T=1,50,1.2346,0\nextra,1,2.0000,3\n"
        );
    }

    #[test]
    fn formats_and_compact_rule() {
        fn pct(x: f64) -> String {
            format!("{:.1}%", 100.0 * x)
        }
        let mut t = Table::new([
            Column::new("label", "label").csv_format(Format::Quoted),
            Column::new("x", "x").right().md_format(Format::Custom(pct)),
        ])
        .compact();
        t.row(cells!["a, b", 0.5]);
        t.row(cells!["", f64::NAN]);
        assert_eq!(
            t.markdown(),
            "| label | x |\n|---|---:|\n| a, b | 50.0% |\n|  | NaN% |"
        );
        assert_eq!(t.csv(), "label,x\n\"a, b\",0.5\n\"\",NaN\n");
        let mut u = Table::new([Column::new("n", "n")]);
        u.row(cells![Some(2u64)]);
        u.row(cells![None::<u64>]);
        let mut all = Table::new([Column::new("n", "n")]);
        all.extend(u);
        assert_eq!(all.len(), 2);
        assert_eq!(all.csv(), "n\n2\n\n");
    }

    #[test]
    #[should_panic(expected = "a row of 2 columns")]
    fn a_short_row_is_a_bug() {
        Table::new([Column::new("a", "a"), Column::new("b", "b")]).row(cells!["x"]);
    }
}
