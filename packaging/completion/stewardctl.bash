# bash completion for stewardctl (installed to share/bash-completion/completions/stewardctl).
_stewardctl() {
  local cur prev words cword
  _init_completion 2>/dev/null || {
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  }
  local commands="status configure-cluster get history backup list-backups restore-backup
    retire-unmanaged dashboard pki snapshot defrag alarm pause resume drain move-leader
    remove-node readd-node recover-quorum destroy undestroy"
  local common="--config --endpoints --timeout-ms --cacert --cert --key -o -w --output
    --write-out --backup-store --cluster --help"
  case "$prev" in
    --config|--dir|--cacert|--cert|--key|--from-file)
      COMPREPLY=($(compgen -f -- "$cur"))
      return ;;
    -o|-w|--output|--write-out)
      COMPREPLY=($(compgen -W "table json simple" -- "$cur"))
      return ;;
  esac
  local cmd="" sub="" i
  for ((i = 1; i < cword; i++)); do
    case "${words[i]}" in
      # Flags that take a value may come before the subcommand: skip the value too.
      --config|--endpoints|--timeout-ms|--cacert|--cert|--key|-o|-w|--output|--write-out|\
      --backup-store|--cluster)
        ((i++)) ;;
      -*) ;;
      *) if [ -z "$cmd" ]; then cmd="${words[i]}"; elif [ -z "$sub" ]; then sub="${words[i]}"; fi ;;
    esac
  done
  case "$cmd" in
    "") COMPREPLY=($(compgen -W "$commands $common --version" -- "$cur")) ;;
    history) COMPREPLY=($(compgen -W "$common --since --limit" -- "$cur")) ;;
    retire-unmanaged) COMPREPLY=($(compgen -W "$common --yes --force" -- "$cur")) ;;
    defrag) COMPREPLY=($(compgen -W "$common --defrag-timeout" -- "$cur")) ;;
    pause|drain) COMPREPLY=($(compgen -W "$common --node --for --reason" -- "$cur")) ;;
    resume) COMPREPLY=($(compgen -W "$common --node" -- "$cur")) ;;
    remove-node) COMPREPLY=($(compgen -W "$common --yes --force --reason" -- "$cur")) ;;
    recover-quorum) COMPREPLY=($(compgen -W "$common --from --yes --force --wait" -- "$cur")) ;;
    destroy) COMPREPLY=($(compgen -W "$common --yes --force --reason" -- "$cur")) ;;
    undestroy) COMPREPLY=($(compgen -W "$common --yes --wait --force" -- "$cur")) ;;
    alarm)
      if [ -z "$sub" ]; then
        COMPREPLY=($(compgen -W "list disarm" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$common" -- "$cur"))
      fi ;;
    dashboard) COMPREPLY=($(compgen -W "--listen --config --agents --cacert --cert --key --help" -- "$cur")) ;;
    configure-cluster) COMPREPLY=($(compgen -W "$common --size" -- "$cur")) ;;
    restore-backup)
      COMPREPLY=($(compgen -W "$common --yes --force --wait --latest --to-revision --to-time --from-file --skip-hash-check" -- "$cur")) ;;
    snapshot)
      if [ -z "$sub" ]; then
        COMPREPLY=($(compgen -W "save status" -- "$cur"))
      else
        COMPREPLY=($(compgen -f -W "$common" -- "$cur"))
      fi ;;
    backup)
      if [ -z "$sub" ]; then
        COMPREPLY=($(compgen -W "export $common" -- "$cur"))
      else
        COMPREPLY=($(compgen -f -W "$common --force" -- "$cur"))
      fi ;;
    pki)
      if [ -z "$sub" ]; then
        COMPREPLY=($(compgen -W "init issue" -- "$cur"))
      elif [ "$sub" = issue ]; then
        COMPREPLY=($(compgen -W "--dir --client" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "--dir" -- "$cur"))
      fi ;;
    *) COMPREPLY=($(compgen -W "$common" -- "$cur")) ;;
  esac
}
complete -F _stewardctl stewardctl
