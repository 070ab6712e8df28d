package contextwin

// Context modes of a conversation (conversations.mode). Each has its own summarisation prompt
// (what a summary of that kind of conversation must keep) and its own system-prompt addition.
const (
	ModeDefault      = "DEFAULT"
	ModeBrainstorm   = "BRAINSTORM"
	ModeOutputRefine = "OUTPUT_REFINE"
	ModeBrowser      = "BROWSER"
	ModeGame         = "GAME"
)

// Modes lists the context modes.
var Modes = []string{ModeDefault, ModeBrainstorm, ModeOutputRefine, ModeBrowser, ModeGame}

var summaryPrompts = map[string]string{
	ModeDefault: "You summarise the earlier part of a conversation between a user and an AI assistant so that the assistant can continue it without the original messages. " +
		"Keep the user's goals and requests, facts and preferences the user stated, decisions made, what the assistant did (files read or changed, tool results that matter, errors met) and questions still open. " +
		"Drop greetings, repetition and anything already superseded.",
	ModeBrainstorm: "You summarise the earlier part of a brainstorming session between a user and an AI assistant. " +
		"Keep, in separate sections: the confirmed requirements (only what the user accepted), the decisions taken and why, the ideas still under consideration, and the ideas the user rejected (so they are not proposed again). " +
		"Drop ideas that were only mentioned in passing.",
	ModeOutputRefine: "You summarise the earlier part of a session in which a user and an AI assistant refine one output (a text, a document, code) step by step. " +
		"Keep what the output is and its current state, every change the user requested and whether it has been applied (list the applied changes and the pending ones separately), and the constraints the user set on style, length or format.",
	ModeBrowser: "You summarise the earlier part of a session in which an AI assistant browses and researches for a user. " +
		"Keep the task being researched, the pages and sources visited (with their URLs or names), what was found at each, the conclusions drawn so far, and what remains to look up.",
	ModeGame: "You summarise the story so far of an interactive game or role-play between a player (the user) and an AI game master. " +
		"Keep the story's main events in order, the characters and their relationships, the places, the player's character, state and inventory, the rules of the world established so far, and the plot threads still open. " +
		"Write it as a compact story summary.",
}

var modeInstructions = map[string]string{
	ModeDefault: "",
	ModeBrainstorm: "Mode: brainstorming. Help the user explore: offer varied ideas, build on theirs, point out trade-offs, and keep track of which requirements and decisions the user has confirmed. " +
		"Do not present an idea as decided until the user confirms it.",
	ModeOutputRefine: "Mode: output refinement. The user is refining one output with you: apply exactly the changes requested, keep everything else unchanged, and say briefly which changes you applied.",
	ModeBrowser:      "Mode: browsing and research. Keep track of the sources you consult, say where each finding comes from, and distinguish what a source says from your own inference.",
	ModeGame: "Mode: game master. You run an interactive story with the user as the player: stay in character, keep the world, its characters and its rules consistent with the story so far, " +
		"describe the consequences of the player's actions and end each turn by letting the player act.",
}

// SummaryPrompt is the summariser's system prompt for a conversation mode (DEFAULT's for an
// unknown mode).
func SummaryPrompt(mode string) string {
	if p, ok := summaryPrompts[mode]; ok {
		return p
	}
	return summaryPrompts[ModeDefault]
}

// ModeInstruction is what a conversation mode adds to the system prompt ("" for DEFAULT).
func ModeInstruction(mode string) string { return modeInstructions[mode] }
