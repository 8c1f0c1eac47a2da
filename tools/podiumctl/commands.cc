#include "commands.h"

#include "format.h"

namespace podium::ctl {

void PrintDocument(const CommandContext& ctx, const boost::json::value& doc,
                   const std::function<std::string(bool wide)>& table, const std::function<std::string()>& names) {
  switch (ctx.invocation.output) {
    case OutputFormat::kTable: ctx.out << table(false); break;
    case OutputFormat::kWide: ctx.out << table(true); break;
    case OutputFormat::kJson: ctx.out << RenderJson(doc); break;
    case OutputFormat::kYaml: ctx.out << RenderYaml(doc); break;
    case OutputFormat::kName: ctx.out << (names ? names() : table(false)); break;
  }
  ctx.out << std::flush;
}

absl::Status RunCommand(CommandContext& ctx) {
  switch (ctx.invocation.command) {
    case Command::kQueue: return RunQueue(ctx);
    case Command::kExplain: return RunExplain(ctx);
    case Command::kNodes: return RunNodes(ctx);
    case Command::kPlugins: return RunPlugins(ctx);
    case Command::kPause: return RunPause(ctx, true);
    case Command::kResume: return RunPause(ctx, false);
    case Command::kActivate: return RunActivate(ctx);
    case Command::kWatch: return RunWatch(ctx);
    case Command::kLogLevel: return RunLogLevel(ctx);
    case Command::kStatus: return RunStatus(ctx);
    case Command::kHelp:
    case Command::kCompletion: break;
  }
  return absl::InternalError("RunCommand: not a command that calls the scheduler");
}

}  // namespace podium::ctl
