// Internal to the tool_prompt*.cpp files (server/tool_calls.h): the JSON writing the templates use
// and a call's arguments.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/tool_calls.h"

namespace strata::server::tool_detail {

// JSON as Python's json.dumps writes it (", " and ": "; with indent > 0, one item a line), which
// the templates' tojson is.
std::string py_json(const nlohmann::ordered_json& j, int indent = 0);
// One call's arguments as JSON (OpenAI sends them as a JSON string); message `msg`'s error if not.
Result<nlohmann::ordered_json> call_arguments(const nlohmann::ordered_json& fn, size_t msg);

// apply_chat_tools for the syntaxes that write between turns: llama3, mistral, harmony
// (tool_prompt_turns.cpp).
Status apply_turn_tools(ToolSyntax syntax, const ChatTools& t, std::vector<ChatMessage>* messages,
                        ChatInserts* inserts);

}  // namespace strata::server::tool_detail
