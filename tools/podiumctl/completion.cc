// podiumctl completion bash: commands, flags and their values; pod names for
// explain and activate come from the running scheduler (podiumctl queue -o name,
// with the address and credentials flags given on the line).
#include "commands.h"

namespace podium::ctl {

std::string BashCompletion() {
  return R"BASH(# bash completion for podiumctl.  source <(podiumctl completion bash)
_podiumctl() {
  local cur prev words cword
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  local commands="queue explain nodes plugins status pause resume activate watch log-level completion help"
  local global="--address --timeout --output -o --help -h"
  global="$global --token-file --tls-ca-file --tls-cert-file --tls-key-file --tls-server-name"
  local cmd="" conn=() i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      # How to reach the scheduler, for the pod names below.
      --address|--token-file|--tls-ca-file|--tls-cert-file|--tls-key-file|--tls-server-name)
        conn+=("${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}"); ((i++)) ;;
      --address=*|--token-file=*|--tls-*=*) conn+=("${COMP_WORDS[i]}") ;;
      --timeout|--output|-o|--namespace|-n|--queue|--plugin|--limit|--continue|--chunk-size|--count) ((i++)) ;;
      -*) ;;
      *) [[ -z "$cmd" ]] && cmd="${COMP_WORDS[i]}" ;;
    esac
  done
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "table wide json yaml name" -- "$cur")); return ;;
    --queue) COMPREPLY=($(compgen -W "active backoff unschedulable gated in-flight waiting-on-permit" -- "$cur")); return ;;
    --token-file|--tls-ca-file|--tls-cert-file|--tls-key-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --address|--timeout|--tls-server-name|--namespace|-n|--plugin|--limit|--continue|--chunk-size|--count) return ;;
  esac
  if [[ -z "$cmd" ]]; then
    COMPREPLY=($(compgen -W "$commands $global" -- "$cur"))
    return
  fi
  local flags="$global"
  case "$cmd" in
    queue) flags="$flags --namespace -n --queue --plugin --limit --continue --chunk-size" ;;
    explain) flags="$flags --namespace -n" ;;
    activate) flags="$flags --namespace -n --all-unschedulable" ;;
    watch) flags="$flags --namespace -n --count" ;;
    completion) COMPREPLY=($(compgen -W "bash" -- "$cur")); return ;;
    help) COMPREPLY=($(compgen -W "$commands" -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return
  fi
  case "$cmd" in
    explain|activate)
      COMPREPLY=($(compgen -W "$(podiumctl "${conn[@]}" queue -o name 2>/dev/null)" -- "$cur")) ;;
  esac
}
complete -F _podiumctl podiumctl
)BASH";
}

}  // namespace podium::ctl
