-- Drives redline's language server through Neovim's built-in LSP client (headless).
-- Usage: nvim --headless -u NONE -l? (0.7 has no -l) -> nvim --headless -u NONE -c "luafile nvim_client.lua"
-- Environment: REDLINE_CMD (server command, space separated), REDLINE_FILE, REDLINE_ROOT, REDLINE_OUT,
-- REDLINE_HOVER_LINE (0-based).
local out_path = os.getenv("REDLINE_OUT")
local result = { diagnostics = {}, hover = nil, lenses = nil, error = nil }

local function finish()
  local f = io.open(out_path, "w")
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  local cmd = vim.split(os.getenv("REDLINE_CMD"), " ", { trimempty = true })
  local client_id = vim.lsp.start_client({
    name = "redline",
    cmd = cmd,
    root_dir = os.getenv("REDLINE_ROOT"),
    handlers = {
      ["textDocument/publishDiagnostics"] = function(_, params, ctx, config)
        for _, d in ipairs(params.diagnostics) do
          table.insert(result.diagnostics, { message = d.message, line = d.range.start.line, source = d.source })
        end
        vim.lsp.diagnostic.on_publish_diagnostics(_, params, ctx, config)
      end,
    },
  })
  vim.cmd("edit " .. os.getenv("REDLINE_FILE"))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(bufnr, client_id)
  local got = vim.wait(60000, function()
    for _, d in ipairs(result.diagnostics) do
      if d.source == "redline" then return true end
    end
    return false
  end, 100)
  if not got then
    result.error = "no diagnostics from redline within 60 s"
    return
  end
  local line = tonumber(os.getenv("REDLINE_HOVER_LINE"))
  local params = { textDocument = { uri = vim.uri_from_bufnr(bufnr) }, position = { line = line, character = 4 } }
  local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/hover", params, 20000)
  for _, r in pairs(responses or {}) do
    if r.result and r.result.contents then result.hover = r.result.contents.value end
    if r.err then result.error = vim.inspect(r.err) end
  end
  local lenses = vim.lsp.buf_request_sync(bufnr, "textDocument/codeLens",
    { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }, 20000)
  for _, r in pairs(lenses or {}) do
    if r.result then result.lenses = #r.result end
  end
end)
if not ok then result.error = tostring(err) end
finish()
