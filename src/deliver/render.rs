//! Message text: built-in templates in English and Chinese, and `{{variable}}` overrides.
//!
//! Every message names the class, the object, the cluster, who changed it, what changed and how
//! to fix it. Channel modules pick the pieces their format needs (Markdown for DingTalk and WeCom,
//! Block Kit for Slack, a card for Feishu); this module owns the words.

use crate::config::{ChannelConfig, TemplateConfig};
use crate::model::text::{actor_text, object_path};
use crate::model::{Drift, FieldChange};
use crate::model::{Notice, NoticeKind};
use crate::time::format_time;

use super::Message;

/// Message language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// English.
    En,
    /// Simplified Chinese.
    Zh,
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
}

impl Style {
    /// The style of a configured channel.
    pub fn new(config: &ChannelConfig, public_url: Option<&str>) -> Style {
        Style {
            language: if config.language == "zh" {
                Language::Zh
            } else {
                Language::En
            },
            templates: config.templates.clone(),
            public_url: public_url.map(|url| url.trim_end_matches('/').to_string()),
        }
    }

    /// English, no overrides (tests and the log channel).
    pub fn english() -> Style {
        Style {
            language: Language::En,
            templates: TemplateConfig::default(),
            public_url: None,
        }
    }

    fn zh(&self) -> bool {
        self.language == Language::Zh
    }

    /// The state word, e.g. `FIRING` / `告警`.
    pub fn state_word(&self, kind: NoticeKind) -> &'static str {
        match (kind, self.zh()) {
            (NoticeKind::Firing, false) => "FIRING",
            (NoticeKind::Resolved, false) => "RESOLVED",
            (NoticeKind::Repeat, false) => "STILL FIRING",
            (NoticeKind::Firing, true) => "告警",
            (NoticeKind::Resolved, true) => "已恢复",
            (NoticeKind::Repeat, true) => "持续告警",
        }
    }

    /// The class name people read.
    pub fn class_name(&self, class: &str) -> String {
        if !self.zh() {
            return class.to_string();
        }
        let name = crate::classify::classes::by_id(class)
            .map(|known| known.names().zh)
            .unwrap_or(class);
        format!("{name}（{class}）")
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

    /// One-line title of a notice.
    pub fn title(&self, notice: &Notice) -> String {
        if let Some(template) = &self.templates.title {
            return fill(template, notice, self);
        }
        let drift = &notice.drift;
        if self.zh() {
            format!(
                "【{}】{} {} {}（{}）",
                self.state_word(notice.kind),
                self.class_name(&drift.class),
                drift.kind,
                object_path(drift),
                drift.cluster
            )
        } else {
            format!(
                "[{}] {} on {} {} ({})",
                self.state_word(notice.kind),
                drift.class,
                drift.kind,
                object_path(drift),
                drift.cluster
            )
        }
    }

    /// The title of a message (a digest says how many drifts it carries).
    pub fn message_title(&self, message: &Message) -> String {
        match message.notices.as_slice() {
            [single] if message.omitted == 0 => self.title(single),
            notices => {
                let total = notices.len() + message.omitted;
                let firing = notices
                    .iter()
                    .filter(|notice| notice.kind != NoticeKind::Resolved)
                    .count();
                if self.zh() {
                    format!(
                        "【漂移汇总】{total} 条（告警 {firing}，已恢复 {}）",
                        notices.len() - firing
                    )
                } else {
                    format!(
                        "[DIGEST] {total} drifts ({firing} firing, {} resolved)",
                        notices.len() - firing
                    )
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

    /// The notice's facts as (label, value) pairs.
    pub fn fields(&self, notice: &Notice) -> Vec<(&'static str, String)> {
        let drift = &notice.drift;
        let mut fields = vec![
            (self.label("severity"), self.severity(drift)),
            (self.label("cluster"), drift.cluster.clone()),
            (
                self.label("object"),
                format!("{} {}", drift.kind, object_path(drift)),
            ),
        ];
        if let Some(service) = &drift.owner.service {
            fields.push((self.label("service"), service.clone()));
        }
        if let Some(actor) = actor_text(drift) {
            fields.push((self.label("actor"), actor));
        }
        fields.push((self.label("since"), format_time(drift.since)));
        if notice.kind == NoticeKind::Resolved {
            if let Some(reason) = &drift.resolution {
                fields.push((self.label("resolution"), reason.clone()));
            }
        }
        fields
    }

    /// Markdown body of a message. `code_blocks`: whether the destination renders fenced code.
    pub fn markdown(&self, message: &Message, code_blocks: bool) -> String {
        let mut out = String::new();
        for (index, notice) in message.notices.iter().enumerate() {
            if index > 0 {
                out.push_str("\n---\n\n");
            }
            if let Some(template) = &self.templates.body {
                out.push_str(&fill(template, notice, self));
                out.push('\n');
                continue;
            }
            out.push_str(&format!("#### {}\n\n", self.title(notice)));
            out.push_str(&format!("> {}\n\n", notice.drift.evidence.summary));
            for (label, value) in self.fields(notice) {
                out.push_str(&format!("- **{label}**: {value}\n"));
            }
            let changes = &notice.drift.evidence.changes;
            if !changes.is_empty() && notice.kind != NoticeKind::Resolved {
                out.push_str(&format!("\n**{}**\n\n", self.label("changes")));
                let lines = diff_lines(changes, 10);
                if code_blocks {
                    out.push_str("```\n");
                    for line in &lines {
                        out.push_str(line);
                        out.push('\n');
                    }
                    out.push_str("```\n");
                } else {
                    for line in &lines {
                        out.push_str(&format!("- {line}\n"));
                    }
                }
            }
            if let (Some(hint), true) = (
                &notice.drift.evidence.hint,
                notice.kind != NoticeKind::Resolved,
            ) {
                if code_blocks {
                    out.push_str(&format!("\n**{}**\n```\n{hint}\n```\n", self.label("hint")));
                } else {
                    out.push_str(&format!("\n**{}**: {hint}\n", self.label("hint")));
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

    /// Plain text of a message (notification previews, fallbacks).
    pub fn plain(&self, message: &Message) -> String {
        let mut lines = vec![self.message_title(message)];
        for notice in &message.notices {
            if message.notices.len() > 1 {
                lines.push(format!(
                    "- {}: {}",
                    self.title(notice),
                    notice.drift.evidence.summary
                ));
            } else {
                lines.push(notice.drift.evidence.summary.clone());
            }
        }
        lines.join("\n")
    }
}

/// `path: before → after` lines, at most `max` plus a count of the rest.
pub(crate) fn diff_lines(changes: &[FieldChange], max: usize) -> Vec<String> {
    let show = |value: &Option<serde_json::Value>| match value
        .as_ref()
        .map(crate::classify::evidence::diff::bounded)
    {
        None => "∅".to_string(),
        Some(serde_json::Value::String(text)) => text,
        Some(other) => other.to_string(),
    };
    let mut lines: Vec<String> = changes
        .iter()
        .take(max)
        .map(|change| {
            format!(
                "{}: {} → {}",
                change.path,
                show(&change.before),
                show(&change.after)
            )
        })
        .collect();
    if changes.len() > max {
        lines.push(format!("… {} more", changes.len() - max));
    }
    lines
}

/// Fills `{{variable}}` placeholders.
pub fn fill(template: &str, notice: &Notice, style: &Style) -> String {
    let drift = &notice.drift;
    let variables: [(&str, String); 14] = [
        ("state", style.state_word(notice.kind).to_string()),
        ("class", drift.class.clone()),
        ("className", style.class_name(&drift.class)),
        ("severity", drift.severity.as_str().to_string()),
        ("cluster", drift.cluster.clone()),
        ("namespace", drift.namespace.clone()),
        ("kind", drift.kind.clone()),
        ("name", drift.name.clone()),
        ("service", drift.owner.service.clone().unwrap_or_default()),
        ("summary", drift.evidence.summary.clone()),
        ("actor", actor_text(drift).unwrap_or_default()),
        ("diff", diff_lines(&drift.evidence.changes, 10).join("\n")),
        ("hint", drift.evidence.hint.clone().unwrap_or_default()),
        ("link", style.link(drift).unwrap_or_default()),
    ];
    let mut out = template.to_string();
    for (name, value) in variables {
        out = out.replace(&format!("{{{{{name}}}}}"), &value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Drift, DriftState, Evidence, OwnerChain, Severity};

    fn notice() -> Notice {
        Notice {
            kind: NoticeKind::Firing,
            drift: Drift {
                id: "d1".into(),
                class: "traffic_drift".into(),
                severity: Severity::Critical,
                state: DriftState::Firing,
                cluster: "prod".into(),
                uid: "u".into(),
                api_version: "serving.knative.dev/v1".into(),
                kind: "Service".into(),
                namespace: "pay".into(),
                name: "checkout".into(),
                labels: Default::default(),
                owner: OwnerChain {
                    service: Some("checkout".into()),
                    ..Default::default()
                },
                evidence: Evidence {
                    summary: "split moved".into(),
                    hint: Some("kn service update checkout".into()),
                    ..Default::default()
                },
                since: 0,
                fire_at: 0,
                fired_at: Some(0),
                resolved_at: None,
                resolution: None,
            },
            at: 0,
            resend: 0,
        }
    }

    #[test]
    fn builtin_titles_in_both_languages() {
        let mut style = Style::english();
        assert_eq!(
            style.title(&notice()),
            "[FIRING] traffic_drift on Service pay/checkout (prod)"
        );
        style.language = Language::Zh;
        assert_eq!(
            style.title(&notice()),
            "【告警】流量漂移（traffic_drift） Service pay/checkout（prod）"
        );
    }

    #[test]
    fn template_overrides_fill_variables() {
        let mut style = Style::english();
        style.templates = TemplateConfig {
            title: Some("{{state}}: {{className}} {{namespace}}/{{name}} [{{severity}}]".into()),
            body: Some("{{summary}} -> {{hint}} ({{service}}, {{cluster}})".into()),
        };
        assert_eq!(
            style.title(&notice()),
            "FIRING: traffic_drift pay/checkout [critical]"
        );
        let message = Message {
            id: "m".into(),
            notices: vec![notice()],
            now: 0,
            omitted: 0,
        };
        assert_eq!(
            style.markdown(&message, true),
            "split moved -> kn service update checkout (checkout, prod)\n"
        );
    }
}
