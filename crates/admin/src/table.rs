//! Tables as a person reads them on a terminal (borders, a coloured header) and as a program
//! reads them from a pipe (tab-separated, one header line, no escape codes).

use std::fmt::Write as _;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Color, ContentArrangement};

/// Where output goes, and so how it is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// A terminal: boxes and colours.
    Terminal,
    /// A pipe or a file: tab-separated values.
    Plain,
}

impl Style {
    /// The style for standard output as it is now, unless `plain` asks for plain text.
    pub fn detect(plain: bool) -> Style {
        match !plain && console::Term::stdout().is_term() {
            true => Style::Terminal,
            false => Style::Plain,
        }
    }

    /// `text` as a title: bold and coloured on a terminal, `# text` in a pipe.
    pub fn title(self, text: &str) -> String {
        match self {
            Style::Terminal => console::style(text)
                .bold()
                .cyan()
                .force_styling(true)
                .to_string(),
            Style::Plain => format!("# {text}"),
        }
    }

    /// `text` as an error.
    pub fn error(self, text: &str) -> String {
        match self {
            Style::Terminal => console::style(text).red().force_styling(true).to_string(),
            Style::Plain => text.to_owned(),
        }
    }
}

/// A table: a header and rows of as many cells.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(header: impl IntoIterator<Item = impl Into<String>>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (cells past the header's are dropped, missing ones are empty).
    pub fn row(&mut self, cells: impl IntoIterator<Item = impl Into<String>>) {
        let mut cells: Vec<String> = cells.into_iter().map(Into::into).collect();
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
    }

    /// The table drawn in `style`, ending with a newline.
    pub fn render(&self, style: Style) -> String {
        match style {
            Style::Plain => {
                let mut text = self.header.join("\t");
                text.push('\n');
                for row in &self.rows {
                    let _ = writeln!(text, "{}", row.join("\t"));
                }
                text
            }
            Style::Terminal => {
                let mut table = comfy_table::Table::new();
                table
                    .load_preset(UTF8_FULL_CONDENSED)
                    .set_content_arrangement(ContentArrangement::Dynamic)
                    .set_header(
                        self.header
                            .iter()
                            .map(|name| Cell::new(name).fg(Color::Cyan)),
                    );
                for row in &self.rows {
                    table.add_row(row);
                }
                format!("{table}\n")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_output_is_tab_separated_with_one_header_line() {
        let mut table = Table::new(["name", "value"]);
        table.row(["objects", "3"]);
        table.row(["short"]);
        assert_eq!(
            table.render(Style::Plain),
            "name\tvalue\nobjects\t3\nshort\t\n"
        );
    }

    #[test]
    fn terminal_output_draws_every_cell() {
        let mut table = Table::new(["name", "value"]);
        table.row(["objects", "3"]);
        let drawn = table.render(Style::Terminal);
        assert!(drawn.contains("objects") && drawn.contains('3'), "{drawn}");
    }
}
