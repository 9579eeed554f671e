-- The older layout's name of a job field given by its short name (lanes.md, "The job hash"):
-- a job hash written by an older version holds its fields under these long names.
local JOB_LONG = {p = 'payload', r = 'room', l = 'lane', s = 'seq', a = 'attempts',
  m = 'max_attempts', t = 'state', e = 'enqueued_ms', x = 'last_error'}
local function job_long(short)
  return JOB_LONG[short]
end
