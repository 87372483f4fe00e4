"""A tiny MCP server (stdio) keeping notes in memory for as long as it runs (one rollout)."""

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server

app = Server("notes")
NOTES: list[str] = []


@app.tool()
def save_note(text: str) -> str:
    """Save a note; returns how many notes there are now."""
    NOTES.append(text)
    return f"saved note {len(NOTES)}"


@app.tool()
def list_notes() -> str:
    """Every saved note, one per line."""
    return "\n".join(NOTES) or "(no notes)"


if __name__ == "__main__":
    app.run()
