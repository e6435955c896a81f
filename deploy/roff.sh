# Sourced by deploy/gen-man.sh and deploy/gen-man-client.sh.
# esc TEXT: TEXT as a roff line (backslashes, hyphens, and a leading dot or quote escaped).
esc() {
    local s=${1//\\/\\e}
    s=${s//-/\\-}
    [[ $s == .* || $s == \'* ]] && s="\\&$s"
    printf '%s\n' "$s"
}
