//! Message text: built-in templates in English and Chinese, and `{{variable}}` overrides.
//!
//! Every message names the class, the object, the cluster, who changed it, what changed and how
//! to fix it. Channel modules pick the pieces their format needs (Markdown for DingTalk and WeCom,
//! Block Kit for Slack, a card for Feishu); this module owns the words.
//!
//! Most of what a message shows comes from the cluster: names, changed values (a ConfigMap value
//! is any text its editor wants), summaries and hints that quote them, the user who made a change.
//! Every such value goes through [`Markup`] for the destination before it is placed, so a value
//! stays on one line and cannot add a heading, a link, an image, HTML, a mention or a code fence
//! to the ops channel. Only the templates (ours, or the operator's `templates:`) make structure.

use drift_core::config::{ChannelConfig, Language, TemplateConfig};
use drift_model::class::ClassCatalog;
use drift_model::text::{actor_text, object_path};
use drift_model::time::format_time;
use drift_model::{Drift, FieldChange};
use drift_model::{Notice, NoticeKind};

use super::Message;

/// The markup a value from the cluster is written into, and how it is made inert there.
///
/// Every markup keeps a value on one line: a line break (`\r\n`, `\n`, `\r`, or a Unicode
/// line or paragraph separator) is shown as the two characters `\n`. Beyond that:
///
/// * [`Markup::Markdown`] (DingTalk, WeCom, Feishu's `lark_md`): these renderers are not public and
///   their escapes are not documented (a backslash may show as a backslash), so nothing relies on
///   an escape. Instead a zero-width space (U+200B) is put where a construct would start, which
///   no Markdown renderer reads as syntax and a person does not see: before a value whose first
///   character could open a block (`#` heading, `>` quote, list, fence, table, reference
///   definition), between `]` and `(` or `[` (links and images), after `<` when a tag, autolink or
///   mention could follow (`<font>`, Feishu's `<at …>`, WeCom's `<@userid>`), after `&` when an
///   entity could follow (`&#60;at …&#62;`), inside runs of three backticks or tildes (code
///   fences), and after the `@` of the group mentions `@all`,
///   `@所有人`, `@here`, `@channel` and `@everyone`. Other characters are left as they are, so an
///   image digest (`@sha256:…`) or a command stays as written.
/// * [`Markup::Slack`] (mrkdwn): `&`, `<` and `>` become entities (Slack's documented escaping,
///   which also disables `<@U123>`, `<!channel>` and `<url|label>`), plus the zero-width space
///   in backtick runs and group mentions.
/// * [`Markup::Plain`] (titles shown as plain text, the log and Alertmanager): one line only.
///
/// Inside a fenced code block ([`Markup::code`]) the same holds, but for the start of the line,
/// which a code block does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markup {
    /// Plain text: one line.
    Plain,
    /// Markdown as DingTalk, WeCom and Feishu render it.
    Markdown,
    /// Slack's mrkdwn.
    Slack,
}

/// Invisible to a reader, and a character like any other to a Markdown parser: it breaks the
/// constructs that must start at a given character.
const ZERO_WIDTH_SPACE: char = '\u{200B}';

/// Group mentions that notify a whole chat on some service when written as text.
const GROUP_MENTIONS: &[&str] = &["all", "所有人", "here", "channel", "everyone"];

impl Markup {
    /// `value` as text of this markup.
    pub fn text(self, value: &str) -> String {
        let line = one_line(value);
        match self {
            Markup::Plain => line,
            Markup::Markdown => defang_markdown(&line, true),
            Markup::Slack => break_group_mentions(&break_fences(&slack_escape(&line))),
        }
    }

    /// `value` as a line inside a fenced code block of this markup. A CommonMark renderer reads
    /// nothing there but a closing fence; the vendors' renderers are not CommonMark (Feishu's
    /// `<at>` and WeCom's `<@userid>` may well be read before the Markdown is), so tags,
    /// mentions and links are broken there too. Only the start of the line is left alone.
    pub fn code(self, value: &str) -> String {
        let line = one_line(value);
        match self {
            Markup::Plain => line,
            Markup::Markdown => defang_markdown(&line, false),
            Markup::Slack => break_group_mentions(&break_fences(&slack_escape(&line))),
        }
    }
}

/// A value on one line: each line break becomes the two characters `\n`.
pub(crate) fn one_line(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut characters = value.chars().peekable();
    while let Some(character) = characters.next() {
        match character {
            '\r' => {
                if characters.peek() == Some(&'\n') {
                    characters.next();
                }
                out.push_str("\\n");
            }
            '\n' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out
}

/// Escapes Slack's control characters (`&` first).
pub(crate) fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Breaks every run of three or more backticks or tildes, which could open or close a code
/// fence, with zero-width spaces.
fn break_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let characters: Vec<char> = text.chars().collect();
    for (index, character) in characters.iter().enumerate() {
        out.push(*character);
        let fence = *character == '`' || *character == '~';
        if fence && characters.get(index + 1) == Some(character) {
            // A run never grows past two without a break.
            let run_before = index > 0 && characters[index - 1] == *character;
            if run_before {
                out.push(ZERO_WIDTH_SPACE);
            }
        }
    }
    out
}

/// Puts a zero-width space after the `@` of a group mention (`@all`, ...) that ends a word.
fn break_group_mentions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        out.push_str(&rest[..=at]);
        let after = &rest[at + 1..];
        let mention = GROUP_MENTIONS.iter().any(|word| {
            after.len() >= word.len()
                && after.is_char_boundary(word.len())
                && after[..word.len()].eq_ignore_ascii_case(word)
                && !after[word.len()..]
                    .chars()
                    .next()
                    .is_some_and(|next| next.is_alphanumeric() || next == '_')
        });
        if mention {
            out.push(ZERO_WIDTH_SPACE);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A one-line value made inert in Markdown (see [`Markup`]); `block_start`: whether it may be
/// read where a block can start.
fn defang_markdown(line: &str, block_start: bool) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    // A value that starts a line in a template (after `> ` or `- `, or anywhere in an operator's
    // template) must not open a block: a heading, quote, list item, fence, table row, thematic
    // break, HTML block or link reference definition.
    // Tabs count as indentation too (`> \t# x` is a heading in a quote).
    let start = line.trim_start_matches([' ', '\t']);
    let ordered_item = start
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .starts_with(['.', ')'])
        && start.starts_with(|c: char| c.is_ascii_digit());
    // A list marker, thematic break or setext underline needs a space (or the end, or the same
    // character) after its first character: `-1` is a number, `- 1` a list item.
    let mut leading = start.chars();
    let marker = match (leading.next(), leading.next()) {
        (Some(first @ ('-' | '+' | '*' | '=' | '_')), second) => {
            second.is_none_or(|second| second == ' ' || second == '\t' || second == first)
        }
        (Some(first), _) => "#>|[!<`~".contains(first),
        (None, _) => false,
    };
    if block_start && (ordered_item || marker) {
        out.push(ZERO_WIDTH_SPACE);
    }
    let characters: Vec<char> = line.chars().collect();
    for (index, character) in characters.iter().enumerate() {
        out.push(*character);
        let next = characters.get(index + 1).copied();
        match (character, next) {
            // `[text](url)`, `![alt](url)`, `[text][ref]`.
            (']', Some('(' | '[')) => out.push(ZERO_WIDTH_SPACE),
            // Tags (`<font>`, `<at …>`, `</…>`, `<!…>`, `<?…>`), autolinks (`<https://…>`)
            // and WeCom's `<@userid>`.
            ('<', Some(next)) if next.is_ascii_alphabetic() || "/!?@#".contains(next) => {
                out.push(ZERO_WIDTH_SPACE)
            }
            // Entities (`&#60;`, `&lt;`): a renderer that decodes them before it reads tags
            // would turn `&#60;at id=all&#62;` into a mention; shown as written instead.
            ('&', Some(next)) if next.is_ascii_alphabetic() || next == '#' => {
                out.push(ZERO_WIDTH_SPACE)
            }
            _ => {}
        }
    }
    break_group_mentions(&break_fences(&out))
}

/// How a channel words its messages.
#[derive(Debug, Clone)]
pub struct Style {
    /// Language of built-in templates.
    pub language: Language,
    /// Overrides.
    pub templates: TemplateConfig,
    /// Base URL for links to the dashboard.
    pub public_url: Option<String>,
    /// The classes' names in each language.
    pub classes: ClassCatalog,
}

impl Style {
    /// The style of a configured channel, naming classes from `classes`.
    pub fn new(config: &ChannelConfig, public_url: Option<&str>, classes: &ClassCatalog) -> Style {
        Style {
            language: config.language,
            templates: config.templates.clone(),
            public_url: public_url.map(|url| url.trim_end_matches('/').to_string()),
            classes: classes.clone(),
        }
    }

    /// English, no overrides (tests and the log channel): classes by their ids, so no names.
    pub fn english() -> Style {
        Style {
            language: Language::En,
            templates: TemplateConfig::default(),
            public_url: None,
            classes: ClassCatalog::default(),
        }
    }

    fn zh(&self) -> bool {
        self.language == Language::Zh
    }

    /// The state word, e.g. `FIRING` / `告警`.
    pub(crate) fn state_word(&self, kind: NoticeKind) -> &'static str {
        match (kind, self.zh()) {
            (NoticeKind::Firing, false) => "FIRING",
            (NoticeKind::Resolved, false) => "RESOLVED",
            (NoticeKind::Repeat, false) => "STILL FIRING",
            (NoticeKind::Remediation, false) => "REMEDIATION",
            (NoticeKind::Firing, true) => "告警",
            (NoticeKind::Resolved, true) => "已恢复",
            (NoticeKind::Repeat, true) => "持续告警",
            (NoticeKind::Remediation, true) => "自动修复",
        }
    }

    /// The class name people read.
    pub(crate) fn class_name(&self, class: &str) -> String {
        if !self.zh() {
            return class.to_string();
        }
        let name = self
            .classes
            .by_id(class)
            .map(|known| known.chinese)
            .unwrap_or(class);
        format!("{name}（{class}）")
    }

    /// The class name people read, with the rule of an `invariant` drift after it.
    pub(crate) fn drift_class(&self, drift: &Drift) -> String {
        let class = if self.zh() {
            self.class_name(&drift.class)
        } else {
            drift.class.clone()
        };
        match &drift.rule {
            Some(rule) => format!("{class} {rule}"),
            None => class,
        }
    }

    /// A label in the message's language.
    pub fn label(&self, key: &str) -> &'static str {
        match (key, self.zh()) {
            ("severity", false) => "Severity",
            ("cluster", false) => "Cluster",
            ("object", false) => "Object",
            ("service", false) => "Service",
            ("actor", false) => "Changed by",
            ("changes", false) => "What changed",
            ("hint", false) => "Fix",
            ("since", false) => "Since",
            ("resolution", false) => "Resolved because",
            ("more", false) => "more",
            ("omitted", false) => "more drifts not shown; see the dashboard",
            ("truncated", false) => "message truncated to fit the destination's size limit",
            ("remediation", false) => "Remediation",
            ("severity", true) => "级别",
            ("cluster", true) => "集群",
            ("object", true) => "对象",
            ("service", true) => "服务",
            ("actor", true) => "修改者",
            ("changes", true) => "变更内容",
            ("hint", true) => "修复建议",
            ("since", true) => "开始时间",
            ("resolution", true) => "恢复原因",
            ("more", true) => "更多",
            ("omitted", true) => "条漂移未显示，请查看控制台",
            ("truncated", true) => "消息超出目标长度限制，已截断",
            ("remediation", true) => "修复",
            _ => "",
        }
    }

    /// The severity word.
    pub fn severity(&self, drift: &Drift) -> String {
        let word = drift.severity.as_str();
        if !self.zh() {
            return word.to_string();
        }
        match word {
            "critical" => "严重".to_string(),
            "warning" => "警告".to_string(),
            _ => "提示".to_string(),
        }
    }

    /// One-line title of a notice, as plain text.
    pub fn title(&self, notice: &Notice) -> String {
        self.title_in(notice, Markup::Plain)
    }

    /// One-line title of a notice, its values written for `markup`.
    pub(crate) fn title_in(&self, notice: &Notice, markup: Markup) -> String {
        if let Some(template) = &self.templates.title {
            // An operator's title template is one line too, whatever its values hold.
            return one_line(&fill(template, notice, self, markup));
        }
        let drift = &notice.drift;
        let object = markup.text(&format!("{} {}", drift.kind, object_path(drift)));
        let cluster = markup.text(&drift.cluster);
        if self.zh() {
            format!(
                "【{}】{} {object}（{cluster}）",
                self.state_word(notice.kind),
                markup.text(&self.drift_class(drift)),
            )
        } else {
            format!(
                "[{}] {} on {object} ({cluster})",
                self.state_word(notice.kind),
                markup.text(&self.drift_class(drift)),
            )
        }
    }

    /// The title of a message (a digest says how many drifts it carries), as plain text.
    pub(crate) fn message_title(&self, message: &Message) -> String {
        self.message_title_in(message, Markup::Plain)
    }

    /// The title of a message, its values written for `markup`.
    pub(crate) fn message_title_in(&self, message: &Message, markup: Markup) -> String {
        match message.notices.as_slice() {
            [single] if message.omitted == 0 => self.title_in(single, markup),
            notices => {
                let total = notices.len() + message.omitted;
                let firing = notices
                    .iter()
                    .filter(|notice| matches!(notice.kind, NoticeKind::Firing | NoticeKind::Repeat))
                    .count();
                let resolved = notices
                    .iter()
                    .filter(|notice| notice.kind == NoticeKind::Resolved)
                    .count();
                let remediations = notices
                    .iter()
                    .filter(|notice| notice.kind == NoticeKind::Remediation)
                    .count();
                match (self.zh(), remediations) {
                    (true, 0) => format!("【漂移汇总】{total} 条（告警 {firing}，已恢复 {resolved}）"),
                    (true, _) => format!(
                        "【漂移汇总】{total} 条（告警 {firing}，已恢复 {resolved}，自动修复 {remediations}）"
                    ),
                    (false, 0) => {
                        format!("[DIGEST] {total} drifts ({firing} firing, {resolved} resolved)")
                    }
                    (false, _) => format!(
                        "[DIGEST] {total} notices ({firing} firing, {resolved} resolved, \
                         {remediations} remediations)"
                    ),
                }
            }
        }
    }

    /// A link to the drift in the dashboard, if a public URL is configured.
    pub fn link(&self, drift: &Drift) -> Option<String> {
        self.public_url
            .as_ref()
            .map(|base| format!("{base}/ui/drifts/{}", drift.id))
    }

    /// The notice's facts as (label, value) pairs, the values written for `markup`.
    pub fn fields(&self, notice: &Notice, markup: Markup) -> Vec<(&'static str, String)> {
        let drift = &notice.drift;
        let mut fields = vec![
            (self.label("severity"), self.severity(drift)),
            (self.label("cluster"), markup.text(&drift.cluster)),
            (
                self.label("object"),
                markup.text(&format!("{} {}", drift.kind, object_path(drift))),
            ),
        ];
        if let Some(service) = &drift.owner.service {
            fields.push((self.label("service"), markup.text(service)));
        }
        if let Some(actor) = actor_text(drift) {
            fields.push((self.label("actor"), markup.text(&actor)));
        }
        fields.push((self.label("since"), format_time(drift.since)));
        if let Some(attempt) = &notice.remediation {
            fields.push((
                self.label("remediation"),
                markup.text(&self.remediation_text(attempt)),
            ));
        }
        if notice.kind == NoticeKind::Resolved {
            if let Some(reason) = &drift.resolution {
                fields.push((self.label("resolution"), markup.text(reason)));
            }
        }
        fields
    }

    /// What a remediation attempt did, in one line of the message's language.
    pub(crate) fn remediation_text(&self, attempt: &drift_model::remediation::Attempt) -> String {
        use drift_model::remediation::Outcome;
        let zh = self.zh();
        let action = match (attempt.action.as_str(), zh) {
            ("revert", false) => "revert",
            ("rollback", false) => "roll back",
            ("restore", false) => "restore",
            ("deleteOrphan", false) => "delete the orphan",
            ("revert", true) => "回滚字段",
            ("rollback", true) => "回滚流量",
            ("restore", true) => "恢复对象",
            ("deleteOrphan", true) => "删除孤儿对象",
            (other, _) => other,
        };
        let outcome = match (attempt.outcome, zh) {
            (Outcome::Applied, false) => "applied by drift-sentinel",
            (Outcome::DryRun, false) => "dry run: not sent",
            (Outcome::Refused, false) => "refused",
            (Outcome::Conflict, false) => "not applied: the object moved on",
            (Outcome::Failed, false) => "failed",
            (Outcome::Planned | Outcome::Sending, false) => "under way",
            (Outcome::Applied, true) => "已由 drift-sentinel 执行",
            (Outcome::DryRun, true) => "演练：未发送",
            (Outcome::Refused, true) => "已拒绝",
            (Outcome::Conflict, true) => "未执行：对象已变更",
            (Outcome::Failed, true) => "失败",
            (Outcome::Planned | Outcome::Sending, true) => "进行中",
        };
        let mut text = if zh {
            format!("{action}：{outcome}（规则 {}）", attempt.rule)
        } else {
            format!("{action}: {outcome} (rule {})", attempt.rule)
        };
        if let Some(by) = &attempt.approved_by {
            text.push_str(&if zh {
                format!("，批准人 {by}")
            } else {
                format!(", approved by {by}")
            });
        }
        if let Some(detail) = &attempt.detail {
            text.push_str(&format!(" — {detail}"));
        }
        text
    }

    /// Markdown body of a message (DingTalk, WeCom, Feishu). `code_blocks`: whether the
    /// destination renders fenced code.
    pub fn markdown(&self, message: &Message, code_blocks: bool) -> String {
        let markup = Markup::Markdown;
        let mut out = String::new();
        for (index, notice) in message.notices.iter().enumerate() {
            if index > 0 {
                out.push_str("\n---\n\n");
            }
            if let Some(template) = &self.templates.body {
                out.push_str(&fill(template, notice, self, markup));
                out.push('\n');
                continue;
            }
            out.push_str(&format!("#### {}\n\n", self.title_in(notice, markup)));
            out.push_str(&format!(
                "> {}\n\n",
                markup.text(&notice.drift.evidence.summary)
            ));
            for (label, value) in self.fields(notice, markup) {
                out.push_str(&format!("- **{label}**: {value}\n"));
            }
            let changes = &notice.drift.evidence.changes;
            if !changes.is_empty() && notice.kind != NoticeKind::Resolved {
                out.push_str(&format!("\n**{}**\n\n", self.label("changes")));
                if code_blocks {
                    out.push_str("```\n");
                    for line in diff_lines(changes, 10, markup, Placement::Code) {
                        out.push_str(&line);
                        out.push('\n');
                    }
                    out.push_str("```\n");
                } else {
                    for line in diff_lines(changes, 10, markup, Placement::Text) {
                        out.push_str(&format!("- {line}\n"));
                    }
                }
            }
            if let (Some(hint), true) = (
                &notice.drift.evidence.hint,
                notice.kind != NoticeKind::Resolved,
            ) {
                if code_blocks {
                    out.push_str(&format!(
                        "\n**{}**\n```\n{}\n```\n",
                        self.label("hint"),
                        markup.code(hint)
                    ));
                } else {
                    out.push_str(&format!(
                        "\n**{}**: {}\n",
                        self.label("hint"),
                        markup.text(hint)
                    ));
                }
            }
            if let Some(link) = self.link(&notice.drift) {
                out.push_str(&format!(
                    "\n[{}]({link})\n",
                    if self.zh() {
                        "查看详情"
                    } else {
                        "Open in drift-sentinel"
                    }
                ));
            }
        }
        if message.omitted > 0 {
            out.push_str(&format!(
                "\n… {} {}\n",
                message.omitted,
                self.label("omitted")
            ));
        }
        out
    }

    /// Plain text of a message (notification previews, fallbacks), its values written for
    /// `markup` (Slack's `text` is mrkdwn).
    pub fn plain(&self, message: &Message, markup: Markup) -> String {
        let mut lines = vec![self.message_title_in(message, markup)];
        for notice in &message.notices {
            let summary = markup.text(&notice.drift.evidence.summary);
            if message.notices.len() > 1 {
                lines.push(format!("- {}: {summary}", self.title_in(notice, markup)));
            } else {
                lines.push(summary);
            }
        }
        lines.join("\n")
    }
}

/// Where a diff line goes: text of its markup, or a line of a fenced code block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Running text (a list item, a paragraph).
    Text,
    /// A line inside a fenced code block.
    Code,
}

/// `path: before → after` lines, at most `max` plus a count of the rest, each written for
/// `markup` where it is `placed`.
pub(crate) fn diff_lines(
    changes: &[FieldChange],
    max: usize,
    markup: Markup,
    placed: Placement,
) -> Vec<String> {
    let show =
        |value: &Option<serde_json::Value>| match value.as_ref().map(drift_model::diff::bounded) {
            None => "∅".to_string(),
            Some(serde_json::Value::String(text)) => text,
            Some(other) => other.to_string(),
        };
    let mut lines: Vec<String> = changes
        .iter()
        .take(max)
        .map(|change| {
            let line = format!(
                "{}: {} → {}",
                change.path,
                show(&change.before),
                show(&change.after)
            );
            match placed {
                Placement::Text => markup.text(&line),
                Placement::Code => markup.code(&line),
            }
        })
        .collect();
    if changes.len() > max {
        lines.push(format!("… {} more", changes.len() - max));
    }
    lines
}

/// Fills `{{variable}}` placeholders of an operator's template, each value written for `markup`
/// (`{{diff}}` is one line per change; `{{link}}` is the dashboard's own URL).
pub fn fill(template: &str, notice: &Notice, style: &Style, markup: Markup) -> String {
    let drift = &notice.drift;
    let text = |value: &str| markup.text(value);
    let variables: [(&str, String); 15] = [
        ("state", style.state_word(notice.kind).to_string()),
        ("class", text(&drift.class)),
        ("rule", text(drift.rule.as_deref().unwrap_or_default())),
        ("className", text(&style.class_name(&drift.class))),
        ("severity", drift.severity.as_str().to_string()),
        ("cluster", text(&drift.cluster)),
        ("namespace", text(&drift.namespace)),
        ("kind", text(&drift.kind)),
        ("name", text(&drift.name)),
        (
            "service",
            text(drift.owner.service.as_deref().unwrap_or_default()),
        ),
        ("summary", text(&drift.evidence.summary)),
        ("actor", text(&actor_text(drift).unwrap_or_default())),
        (
            "diff",
            diff_lines(&drift.evidence.changes, 10, markup, Placement::Text).join("\n"),
        ),
        (
            "hint",
            text(drift.evidence.hint.as_deref().unwrap_or_default()),
        ),
        ("link", style.link(drift).unwrap_or_default()),
    ];
    // One pass over the template: a value that holds `{{name}}` is not filled again.
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let tail = &rest[start + 2..];
        let filled = tail.find("}}").and_then(|end| {
            variables
                .iter()
                .find(|(name, _)| *name == &tail[..end])
                .map(|(_, value)| (value, end))
        });
        match filled {
            Some((value, end)) => {
                out.push_str(value);
                rest = &tail[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
pub(crate) mod tests;
