-- wrk script of the benchmark (bench/lib/wrk.ts runs it): POST the body file,
-- and put a token in the Authorization header of every request as the mode says.
--   wrk ... -s bench/lib/wrk-load.lua <url> -- <body file> <mode> [<tokens file> [<starts>]]
--   static  one request for the whole run: its headers, token included, come from -H (shape a)
--   rotate  every thread takes the tokens of <tokens file> in a freshly shuffled order each
--           cycle, so a connection carries the same token twice in a row only by chance (shape b)
--   once    thread i walks <tokens file>.<i> in order from line <starts>[i] + 1 (a comma-separated
--           list: where the last run stopped), a token per request; past the file's end it starts
--           again from its first line and counts each such request as `reused` (shape c)
-- done() prints one line, {"wrk":…}, with the counts, the latency percentiles (µs) and the
-- process's CPU ticks over the run, read from /proc/self/stat (the loader's own CPU use).

local threads = {}

function setup(thread)
  thread:set("index", #threads)
  table.insert(threads, thread)
end

-- utime + stime of the whole process (every thread of wrk), in clock ticks; nil off Linux.
local function cpu_ticks()
  local file = io.open("/proc/self/stat", "r")
  if not file then return nil end
  local stat = file:read("*a")
  file:close()
  local after_name = stat:match("^.*%) (.*)$")
  local fields = {}
  for field in after_name:gmatch("%S+") do fields[#fields + 1] = field end
  return tonumber(fields[12]) + tonumber(fields[13])
end

local function read_lines(path)
  local lines = {}
  for line in io.lines(path) do
    if line ~= "" then lines[#lines + 1] = line end
  end
  if #lines == 0 then error("no tokens in " .. path) end
  return lines
end

local function read_file(path)
  local file = assert(io.open(path, "rb"))
  local content = file:read("*a")
  file:close()
  return content
end

-- The request bytes around the token: the same headers as a static request, Authorization replaced.
local function template()
  local headers = {}
  local authorization = "Authorization"
  for name, value in pairs(wrk.headers) do
    if name:lower() == "authorization" then authorization = name else headers[name] = value end
  end
  local marker = "\0TOKEN\0"
  headers[authorization] = "Bearer " .. marker
  local formatted = wrk.format(nil, nil, headers, nil)
  local at = formatted:find(marker, 1, true)
  return formatted:sub(1, at - 1), formatted:sub(at + #marker)
end

-- Globals of each thread's state, read by done() through thread:get.
used = 0
reused = 0
init_ticks = nil

local function shuffle(list)
  for i = #list, 2, -1 do
    local j = math.random(i)
    list[i], list[j] = list[j], list[i]
  end
end

function init(args)
  wrk.method = "POST"
  wrk.body = read_file(args[1])
  local mode = args[2]
  if mode == "static" then
    request = nil
  elseif mode == "rotate" then
    local prefix, suffix = template()
    local requests = {}
    for i, token in ipairs(read_lines(args[3])) do requests[i] = prefix .. token .. suffix end
    math.randomseed(os.time() * 1000 + index)
    local order = {}
    for i = 1, #requests do order[i] = i end
    local position = #order + 1
    request = function()
      if position > #order then
        shuffle(order)
        position = 1
      end
      local next_request = requests[order[position]]
      position = position + 1
      used = used + 1
      return next_request
    end
  elseif mode == "once" then
    local prefix, suffix = template()
    local tokens = read_lines(args[3] .. "." .. index)
    local count = #tokens
    local starts = {}
    for start in args[4]:gmatch("[0-9]+") do starts[#starts + 1] = tonumber(start) end
    local position = starts[index + 1]
    request = function()
      if position >= count then reused = reused + 1 end
      local token = tokens[position % count + 1]
      position = position + 1
      used = used + 1
      return prefix .. token .. suffix
    end
  else
    error("unknown mode " .. tostring(mode))
  end
  -- The last thread's value is where the measured run starts (init runs before any thread's load).
  init_ticks = cpu_ticks()
end

function done(summary, latency, requests)
  local start_ticks = nil
  local per_thread = {}
  for _, thread in ipairs(threads) do
    local ticks = thread:get("init_ticks")
    if ticks and (start_ticks == nil or ticks > start_ticks) then start_ticks = ticks end
    per_thread[#per_thread + 1] = string.format('{"used":%d,"reused":%d}', thread:get("used"), thread:get("reused"))
  end
  local end_ticks = cpu_ticks()
  local errors = summary.errors
  io.write(string.format(
    '{"wrk":1,"requests":%d,"durationUs":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latencyUs":{"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"max":%d},"cpuTicks":%s,"threads":[%s]}\n',
    summary.requests, summary.duration,
    errors.connect, errors.read, errors.write, errors.status, errors.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    (start_ticks and end_ticks) and tostring(end_ticks - start_ticks) or "null",
    table.concat(per_thread, ",")))
end
