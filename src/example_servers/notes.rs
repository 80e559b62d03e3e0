//! `notes`: notes kept in memory, seeded with two, with honest annotations:
//! `list_notes` and `read_note` are read-only, `add_note` writes but
//! destroys nothing, `delete_note` is destructive.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::json;

use super::flag_value;

#[derive(Debug, Clone)]
pub struct NotesOptions {
    /// Shown as the server's name and in its instructions.
    pub name: String,
}

impl Default for NotesOptions {
    fn default() -> Self {
        NotesOptions {
            name: "notes".into(),
        }
    }
}

impl NotesOptions {
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut options = NotesOptions::default();
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            match arg.as_str() {
                "--name" => options.name = flag_value(arg, &mut iter)?.clone(),
                other => anyhow::bail!("notes: unknown argument `{other}` (known: --name NAME)"),
            }
        }
        Ok(options)
    }
}

#[derive(Debug, Clone)]
struct Note {
    title: String,
    body: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NoteId {
    /// The note's id, as `list_notes` shows it.
    pub id: u64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct NewNote {
    /// A short title.
    pub title: String,
    /// The note's text.
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct NotesServer {
    name: String,
    notes: Arc<Mutex<BTreeMap<u64, Note>>>,
    tool_router: ToolRouter<Self>,
}

impl NotesServer {
    pub fn new(options: &NotesOptions) -> Self {
        let mut notes = BTreeMap::new();
        notes.insert(
            1,
            Note {
                title: "Welcome".into(),
                body: format!(
                    "This is the `{}` notes server shipped with warden.",
                    options.name
                ),
            },
        );
        notes.insert(
            2,
            Note {
                title: "Shopping".into(),
                body: "Milk, bread, coffee.".into(),
            },
        );
        NotesServer {
            name: options.name.clone(),
            notes: Arc::new(Mutex::new(notes)),
            tool_router: Self::tool_router(),
        }
    }

    fn with_notes<T>(&self, f: impl FnOnce(&mut BTreeMap<u64, Note>) -> T) -> T {
        // A poisoned lock only means another handler panicked; the map is
        // still consistent (every mutation is a single insert or remove).
        let mut guard = self
            .notes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}

fn not_found(id: u64) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("no note with id {id}"))])
}

#[tool_router]
impl NotesServer {
    #[tool(
        description = "List all notes (id and title).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    fn list_notes(&self) -> CallToolResult {
        let list: Vec<_> = self.with_notes(|notes| {
            notes
                .iter()
                .map(|(id, note)| json!({"id": id, "title": note.title}))
                .collect()
        });
        let text = list
            .iter()
            .map(|n| format!("{}: {}", n["id"], n["title"].as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join("\n");
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(json!({ "notes": list }));
        result
    }

    #[tool(
        description = "Read one note by id.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    fn read_note(&self, Parameters(NoteId { id }): Parameters<NoteId>) -> CallToolResult {
        match self.with_notes(|notes| notes.get(&id).cloned()) {
            Some(note) => CallToolResult::success(vec![ContentBlock::text(format!(
                "# {}\n\n{}",
                note.title, note.body
            ))]),
            None => not_found(id),
        }
    }

    #[tool(
        description = "Add a note; returns its id.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    fn add_note(&self, Parameters(new): Parameters<NewNote>) -> CallToolResult {
        let id = self.with_notes(|notes| {
            let id = notes.keys().next_back().copied().unwrap_or(0) + 1;
            notes.insert(
                id,
                Note {
                    title: new.title,
                    body: new.body,
                },
            );
            id
        });
        CallToolResult::success(vec![ContentBlock::text(format!("added note {id}"))])
    }

    #[tool(
        description = "Delete a note by id. This cannot be undone.",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    fn delete_note(&self, Parameters(NoteId { id }): Parameters<NoteId>) -> CallToolResult {
        match self.with_notes(|notes| notes.remove(&id)) {
            Some(note) => CallToolResult::success(vec![ContentBlock::text(format!(
                "deleted note {id} ({})",
                note.title
            ))]),
            None => not_found(id),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for NotesServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.name.clone(),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!(
                "`{}`: notes kept in memory. Read-only tools: list_notes, read_note.",
                self.name
            ))
    }
}

pub async fn run_stdio(options: NotesOptions) -> anyhow::Result<()> {
    let running = NotesServer::new(&options)
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}
