// The main() of the example plugin processes: `NAME --listen ADDR` serves
// one plugin on ADDR until the process is stopped.
#pragma once

#include <iostream>
#include <string>
#include <string_view>
#include <utility>

#include "podium/sdk/framework.h"
#include "podium/sdk/serve.h"

namespace podium::sdk::examples {

inline int ServeExample(int argc, char** argv, std::string process_name, PluginDefinition plugin) {
  std::string listen;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--listen" && i + 1 < argc) {
      listen = argv[++i];
    } else if (arg.starts_with("--listen=")) {
      listen = std::string(arg.substr(9));
    } else {
      listen.clear();
      break;
    }
  }
  if (listen.empty()) {
    std::cerr << "usage: " << process_name << " --listen ADDR\n";
    return 2;
  }
  absl::Status served =
      Serve({.address = listen, .process_name = process_name, .plugins = {std::move(plugin)}});
  if (!served.ok()) {
    std::cerr << process_name << ": " << served.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace podium::sdk::examples
