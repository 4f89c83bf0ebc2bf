-- job_submit.lua of a Hyperfleet cluster, written by the control plane (task governance,
-- docs/governance.md "On Slurm"). A job of a governed account (a team with a ComputeQuota on
-- this cluster; the controller's agent keeps the list in the file below, one per line) is
-- held at submission and runs once Hyperfleet's admission engine admits it. Other jobs pass
-- unchanged. Slurm 22.05 counts a priority of 0 set here as the user's own hold; the job is
-- marked (AdminComment, which users cannot set) so that the control plane knows it as its
-- own and turns the hold into an administrator's at once. Until then, slurm_job_modify
-- keeps the user from releasing it.
local GOVERNED = "/opt/slurm/etc/hyperfleet-governed-accounts"
-- slurm.conf's SlurmUser: the agent runs scontrol as root, slurmctld's own updates run as it.
local SLURM_USER = "slurm"
-- ESLURM_JOB_HELD of Slurm 22.05 ("Job is in held state, pending scheduler release"), what
-- scontrol prints for a refused release; job_submit/lua exports only a few error codes.
local ESLURM_JOB_HELD = 2042
-- ESLURM_ACCESS_DENIED of Slurm 22.05 ("Access/permission denied").
local ESLURM_ACCESS_DENIED = 2002
-- An update's fields that change what the admission engine admitted a job as.
local ADMITTED_AS = { "account", "partition", "qos", "min_nodes", "max_nodes",
                      "tres_per_node", "tres_per_job" }

local function governed(account)
  if account == nil or account == "" then return false end
  local f = io.open(GOVERNED, "r")
  if f == nil then return false end
  for line in f:lines() do
    if line == account then
      f:close()
      return true
    end
  end
  f:close()
  return false
end

-- SlurmUser's uid (from /etc/passwd; nil when it is not there).
local function slurm_user_uid()
  local f = io.open("/etc/passwd", "r")
  if f == nil then return nil end
  for line in f:lines() do
    local name, uid = string.match(line, "^([^:]*):[^:]*:(%d+):")
    if name == SLURM_USER then
      f:close()
      return tonumber(uid)
    end
  end
  f:close()
  return nil
end

-- Hyperfleet's marks: the job waits for the admission engine (agent/slurm_jobs.h).
local function ours(admin_comment)
  return admin_comment == "hyperfleet-governed" or admin_comment == "hyperfleet-held"
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not governed(job_desc.account) then return slurm.SUCCESS end
  -- The engine admits whole jobs: an array's tasks and a heterogeneous job's components
  -- would each need an admission of their own, which the report cannot express.
  if job_desc.array_inx ~= nil and job_desc.array_inx ~= "" then
    slurm.log_user("hyperfleet: job arrays are not supported for governed account %s; " ..
                   "submit one job per task", job_desc.account)
    return slurm.ERROR
  end
  if job_desc.het_job_offset ~= nil and job_desc.het_job_offset ~= slurm.NO_VAL then
    slurm.log_user("hyperfleet: heterogeneous jobs are not supported for governed account " ..
                   "%s; submit each component as a job of its own", job_desc.account)
    return slurm.ERROR
  end
  job_desc.priority = 0
  if job_desc.admin_comment == nil or job_desc.admin_comment == "" then
    job_desc.admin_comment = "hyperfleet-governed"
  end
  slurm.log_info("hyperfleet: job of governed account %s held until admitted",
                 job_desc.account)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  -- A job Hyperfleet holds runs once the engine admits it: a release (scontrol release asks
  -- for priority INFINITE) or other priority of the held job comes from root or SlurmUser
  -- only. Without this, a user could release job_submit's hold, which Slurm 22.05 counts as
  -- the user's, before the control plane first sees the job. Slurm 22.05 drops log_user
  -- messages of job_modify: the error code is what the user reads.
  local priority = job_desc.priority
  if priority ~= nil and priority ~= slurm.NO_VAL and priority ~= 0 and
     job_rec.priority == 0 and ours(job_rec.admin_comment) and
     modify_uid ~= 0 and modify_uid ~= slurm_user_uid() then
    slurm.log_info("hyperfleet: uid %d may not release job %d: held until Hyperfleet admits it",
                   modify_uid, job_rec.job_id)
    return ESLURM_JOB_HELD
  end
  -- A pending job Hyperfleet released was admitted with its account, partition, QOS and
  -- size: changed by its user, it could start before the control plane's next look and run
  -- more than admitted. A held job may change (the engine decides it anew), a running one
  -- only shrink.
  if job_rec.priority ~= 0 and job_rec.job_state ~= nil and job_rec.job_state % 256 == 0 and
     ours(job_rec.admin_comment) and modify_uid ~= 0 and modify_uid ~= slurm_user_uid() then
    for _, name in ipairs(ADMITTED_AS) do
      local v = job_desc[name]
      if v ~= nil and v ~= slurm.NO_VAL then
        slurm.log_info("hyperfleet: uid %d may not change %s of job %d: admitted as it is",
                       modify_uid, name, job_rec.job_id)
        return ESLURM_ACCESS_DENIED
      end
    end
  end
  return slurm.SUCCESS
end

return slurm.SUCCESS
