# SPDX-License-Identifier: Apache-2.0
"""
    LibSoftmax

Softmax, log-softmax, fused softmax+dropout, their gradients and the sharded-row helpers from
libsoftmax's C ABI, through `@ccall`.

Julia is column-major and libsoftmax is row-major: a Julia matrix of size `(cols, rows)` lies in
memory exactly as the C matrix `[rows, cols]`. So `dims=1` (the default) normalises each
**column** of a `Matrix` (as `NNlib.softmax(x; dims=1)`), with no copy; a `Vector` is one row.
`dims=2` normalises each row of the Julia matrix, through permuted copies.

The exported names do not clash with NNlib's `softmax`/`logsoftmax`: they are `rowsoftmax`,
`rowlogsoftmax` and the names of the C functions they call. Element types: Float32, Float16 and
Float64; an output may be of another type than its input (its storage type; arithmetic is
Float64 when any array is Float64, Float32 otherwise). The library is found through the
`SOFTMAX_LIBRARY` environment variable (a path to `libsoftmax.so`) or, when that is unset, the
system loader. CUDA arrays come with `using CUDA` (extension LibSoftmaxCUDAExt), ChainRulesCore
`rrule`s with `using ChainRulesCore` (LibSoftmaxChainRulesCoreExt).
"""
module LibSoftmax

using Libdl

export rowsoftmax, rowsoftmax!, rowlogsoftmax, rowlogsoftmax!, softmax_dropout, softmax_dropout!,
       softmax_backward, softmax_backward!, dropout_backward, dropout_backward!, row_stats,
       row_stats!, rows_from_stats, rows_from_stats!, backward_row_stats, backward_row_stats!,
       rows_backward_from_stats, rows_backward_from_stats!, SoftmaxError, libsoftmax_version,
       backend_available

const STATUS_SUCCESS = Cint(0)
"Storage types: element type => softmax_dtype."
const DTYPE = Dict{DataType,Cint}(Float32 => Cint(0), Float16 => Cint(1), Float64 => Cint(3))
const BACKENDS = Dict(:auto => Cint(0), :cpu => Cint(1), :cuda => Cint(2))
const FLAG_LOG = UInt32(0x1)
const FLAG_Y_DTYPE = UInt32(0x2)

"Element types the library stores."
const Element = Union{Float32,Float16,Float64}

"`softmax_options` from include/softmax/softmax.h (an isbits struct: C layout)."
struct Options
    struct_size::Csize_t
    backend::Cint
    flags::UInt32
    stream::Ptr{Cvoid}
    num_threads::Int32
    y_dtype::Cint
end

"""
    SoftmaxError(status, name, message)

A libsoftmax call failed: `status` is the `softmax_status` code, `name` its
`softmax_status_string` ("SOFTMAX_STATUS_INVALID_PROBABILITY") and `message` the call's
`softmax_last_error()` ("dropout p must lie in [0, 1], got 1.5").
"""
struct SoftmaxError <: Exception
    status::Int
    name::String
    message::String
end
Base.showerror(io::IO, e::SoftmaxError) = print(io, "SoftmaxError: ", e.name, ": ", e.message)

# Function pointers, resolved once the library is opened in __init__.
const FN = Dict{Symbol,Ptr{Cvoid}}()
const FUNCTIONS = (:softmax_rows, :softmax_dropout, :softmax_rows_backward,
                   :softmax_dropout_backward, :softmax_row_stats, :softmax_rows_from_stats,
                   :softmax_backward_row_stats, :softmax_rows_backward_from_stats,
                   :softmax_default_options, :softmax_backend_available, :softmax_status_string,
                   :softmax_last_error, :softmax_version)

function __init__()
    path = get(ENV, "SOFTMAX_LIBRARY", "")
    handle = Libdl.dlopen(isempty(path) ? "libsoftmax" : path; throw_error=false)
    if handle === nothing
        error("libsoftmax could not be loaded from ",
              isempty(path) ? "the system loader's path" : "SOFTMAX_LIBRARY=$path",
              "; set SOFTMAX_LIBRARY to the path of libsoftmax.so")
    end
    for name in FUNCTIONS
        FN[name] = Libdl.dlsym(handle, name)
    end
end

status_name(s::Integer) = unsafe_string(@ccall $(FN[:softmax_status_string])(s::Cint)::Cstring)

# Raises for a failed status, reading the thread's message right after the call.
function check(status::Cint)
    status == STATUS_SUCCESS && return nothing
    message = unsafe_string(@ccall $(FN[:softmax_last_error])()::Cstring)
    throw(SoftmaxError(Int(status), status_name(status), message))
end

"The loaded library's version, \"MAJOR.MINOR.PATCH\"."
libsoftmax_version() = unsafe_string(@ccall $(FN[:softmax_version])()::Cstring)

"Whether `backend` (`:auto`, `:cpu`, `:cuda`) can run on this machine now."
backend_available(backend::Symbol) =
    (@ccall $(FN[:softmax_backend_available])(backend_code(backend)::Cint)::Cint) != 0

function backend_code(backend::Symbol)
    haskey(BACKENDS, backend) ||
        throw(ArgumentError("backend must be :auto, :cpu or :cuda, got :$backend"))
    return BACKENDS[backend]
end

# --- memory: host arrays here, CuArrays in LibSoftmaxCUDAExt ---------------------------------
# Contiguous host arrays only: views, adjoints and ranges have no methods (a MethodError).
const HostArray{T} = Union{Vector{T},Matrix{T}}
"The array's data pointer, for the C call."
memptr(a::HostArray) = Ptr{Cvoid}(pointer(a))
"The stream a call on this array is queued on (CUDA arrays: CUDA.jl's task-local stream)."
stream_for(::HostArray) = C_NULL
"The backend a call on this array asks for by default."
default_backend(::HostArray) = :auto

# The C options: the library's defaults (which fill in struct_size), this call's backend,
# flags and stream, and y_dtype when the two sides' storage types differ.
function options(x, ::Type{Tx}, ::Type{Ty}; backend::Symbol, log::Bool=false,
                 num_threads::Integer=0) where {Tx,Ty}
    d = @ccall $(FN[:softmax_default_options])()::Options
    flags = (log ? FLAG_LOG : UInt32(0)) | (Tx === Ty ? UInt32(0) : FLAG_Y_DTYPE)
    return Options(d.struct_size, backend_code(backend), flags, stream_for(x),
                   Int32(num_threads), DTYPE[Ty])
end

# (rows, cols) of the C matrix a Julia array is with dims=1: a Vector is one row, a Matrix's
# columns are its rows. Only the shape agreement the C API cannot see is checked here.
c_shape(x::AbstractVector) = (1, length(x))
c_shape(x::AbstractMatrix) = (size(x, 2), size(x, 1))

function same_shape(x, others...)
    for (what, a) in others
        size(a) == size(x) ||
            throw(DimensionMismatch("$what has size $(size(a)) but x has size $(size(x))"))
    end
    return c_shape(x)
end

function per_row(rows, stats...)
    for (what, s) in stats
        length(s) == rows ||
            throw(DimensionMismatch("$what has $(length(s)) elements but there are $rows rows"))
        eltype(s) === Float32 ||
            throw(ArgumentError("$what must hold Float32 (the C API's float), got $(eltype(s))"))
    end
end

# dims=2 on matrices: the same call on permuted copies, results permuted back into `outs`.
function along(f, dims::Integer, outs::Tuple, ins::Tuple)
    dims == 1 && return f(outs..., ins...)
    dims == 2 || throw(ArgumentError("dims must be 1 (columns) or 2 (rows), got $dims"))
    all(a -> a isa AbstractMatrix, (outs..., ins...)) ||
        throw(ArgumentError("dims=2 needs matrices; a vector is one row (dims=1)"))
    touts = map(o -> similar(o, reverse(size(o))), outs)
    f(touts..., map(permutedims, ins)...)
    foreach((o, t) -> permutedims!(o, t, (2, 1)), outs, touts)
    return nothing
end

# Per-row statistics with dims=2 are per Julia row: the permuted copy has them in that order.
stats_along(f, dims::Integer, ins::Tuple) =
    dims == 1 ? f(ins...) : dims == 2 ? f(map(permutedims, ins)...) :
    throw(ArgumentError("dims must be 1 (columns) or 2 (rows), got $dims"))

# --- forward ---------------------------------------------------------------------------------

"""
    rowsoftmax!(y, x; dims=1, log=false, backend, num_threads=0) -> y

Softmax of each column of `x` (`dims=1`; each row with `dims=2`) into `y`, which may be `x`
itself. `log=true` gives log-softmax. `y` may be of another element type than `x`.
"""
function rowsoftmax!(y::AbstractVecOrMat{Ty}, x::AbstractVecOrMat{Tx}; dims::Integer=1,
                     log::Bool=false, backend::Symbol=default_backend(x),
                     num_threads::Integer=0) where {Tx<:Element,Ty<:Element}
    along(dims, (y,), (x,)) do y, x
        rows, cols = same_shape(x, ("y", y))
        opts = options(x, Tx, Ty; backend, log, num_threads)
        GC.@preserve x y check(@ccall $(FN[:softmax_rows])(
            memptr(x)::Ptr{Cvoid}, memptr(y)::Ptr{Cvoid}, rows::Int64, cols::Int64,
            DTYPE[Tx]::Cint, Ref(opts)::Ref{Options})::Cint)
    end
    return y
end

"""
    rowsoftmax(x; dims=1, log=false, dtype=eltype(x), kw...)

Allocating [`rowsoftmax!`](@ref); `dtype` is the result's element type.
"""
rowsoftmax(x::AbstractVecOrMat; dtype::Type=eltype(x), kw...) =
    rowsoftmax!(similar(x, dtype), x; kw...)
rowlogsoftmax!(y, x; kw...) = rowsoftmax!(y, x; log=true, kw...)
rowlogsoftmax(x::AbstractVecOrMat; kw...) = rowsoftmax(x; log=true, kw...)

"""
    softmax_dropout!(y, x, p, seed, offset=0; mask=nothing, dims=1, backend, num_threads=0) -> y

Softmax fused with inverted dropout: `y = keep ? softmax(x) / (1 - p) : 0`. The keep decision
for element `i` of the C layout (its linear index minus one, for `dims=1`) is a pure function of
`(seed, offset, i)`, identical on the CPU and any GPU. If `mask` (UInt8, `x`'s size) is given it
receives 1 where kept and 0 where dropped.
"""
function softmax_dropout!(y::AbstractVecOrMat{Ty}, x::AbstractVecOrMat{Tx}, p::Real,
                          seed::Integer, offset::Integer=0; mask=nothing, dims::Integer=1,
                          backend::Symbol=default_backend(x),
                          num_threads::Integer=0) where {Tx<:Element,Ty<:Element}
    call = function (y, m, x)
        rows, cols = same_shape(x, ("y", y), ("mask", m === nothing ? x : m))
        opts = options(x, Tx, Ty; backend, num_threads)
        mptr = m === nothing ? C_NULL : memptr(m)
        GC.@preserve x y m check(@ccall $(FN[:softmax_dropout])(
            memptr(x)::Ptr{Cvoid}, memptr(y)::Ptr{Cvoid}, mptr::Ptr{Cvoid}, rows::Int64,
            cols::Int64, DTYPE[Tx]::Cint, Float32(p)::Cfloat, UInt64(seed)::UInt64,
            UInt64(offset)::UInt64, Ref(opts)::Ref{Options})::Cint)
    end
    if mask === nothing
        along((y, x) -> call(y, nothing, x), dims, (y,), (x,))
    else
        eltype(mask) === UInt8 || throw(ArgumentError("mask must hold UInt8, got $(eltype(mask))"))
        along(call, dims, (y, mask), (x,))
    end
    return y
end

"""
    softmax_dropout(x, p, seed, offset=0; return_mask=false, dtype=eltype(x), kw...)

Allocating [`softmax_dropout!`](@ref); with `return_mask=true` returns `(y, mask)`.
"""
function softmax_dropout(x::AbstractVecOrMat, p::Real, seed::Integer, offset::Integer=0;
                         return_mask::Bool=false, dtype::Type=eltype(x), kw...)
    y = similar(x, dtype)
    if return_mask
        mask = similar(x, UInt8)
        softmax_dropout!(y, x, p, seed, offset; mask, kw...)
        return y, mask
    end
    return softmax_dropout!(y, x, p, seed, offset; kw...)
end

# --- backward --------------------------------------------------------------------------------

"""
    softmax_backward!(dx, y, dy; dims=1, log=false, backend, num_threads=0) -> dx

Gradient of [`rowsoftmax`](@ref) from its output `y`: per softmax row
`dx = y .* (dy .- sum(dy .* y))`, or with `log=true` (y from `rowlogsoftmax`)
`dx = dy .- exp.(y) .* sum(dy)`. `y` and `dy` share the forward result's element type, `dx` may
be of the forward input's; `dx` may be `dy` itself.
"""
function softmax_backward!(dx::AbstractVecOrMat{Tx}, y::AbstractVecOrMat{Ty},
                           dy::AbstractVecOrMat{Ty}; dims::Integer=1, log::Bool=false,
                           backend::Symbol=default_backend(y),
                           num_threads::Integer=0) where {Tx<:Element,Ty<:Element}
    along(dims, (dx,), (y, dy)) do dx, y, dy
        rows, cols = same_shape(y, ("dy", dy), ("dx", dx))
        opts = options(y, Tx, Ty; backend, log, num_threads)
        GC.@preserve y dy dx check(@ccall $(FN[:softmax_rows_backward])(
            memptr(y)::Ptr{Cvoid}, memptr(dy)::Ptr{Cvoid}, memptr(dx)::Ptr{Cvoid}, rows::Int64,
            cols::Int64, DTYPE[Tx]::Cint, Ref(opts)::Ref{Options})::Cint)
    end
    return dx
end

"Allocating [`softmax_backward!`](@ref); `dtype` is dx's element type."
softmax_backward(y::AbstractVecOrMat, dy::AbstractVecOrMat; dtype::Type=eltype(y), kw...) =
    softmax_backward!(similar(y, dtype), y, dy; kw...)

"""
    dropout_backward!(dx, x, dy, p, seed, offset=0; dims=1, backend, num_threads=0) -> dx

Gradient of [`softmax_dropout`](@ref) with respect to `x`, recomputed from `x` and the same
`(p, seed, offset)`: no mask or activation is kept. `dx` has `x`'s element type, `dy` may have
the forward result's; `dx` may be `dy` itself.
"""
function dropout_backward!(dx::AbstractVecOrMat{Tx}, x::AbstractVecOrMat{Tx},
                           dy::AbstractVecOrMat{Ty}, p::Real, seed::Integer, offset::Integer=0;
                           dims::Integer=1, backend::Symbol=default_backend(x),
                           num_threads::Integer=0) where {Tx<:Element,Ty<:Element}
    along(dims, (dx,), (x, dy)) do dx, x, dy
        rows, cols = same_shape(x, ("dy", dy), ("dx", dx))
        opts = options(x, Tx, Ty; backend, num_threads)
        GC.@preserve x dy dx check(@ccall $(FN[:softmax_dropout_backward])(
            memptr(x)::Ptr{Cvoid}, memptr(dy)::Ptr{Cvoid}, memptr(dx)::Ptr{Cvoid}, rows::Int64,
            cols::Int64, DTYPE[Tx]::Cint, Float32(p)::Cfloat, UInt64(seed)::UInt64,
            UInt64(offset)::UInt64, Ref(opts)::Ref{Options})::Cint)
    end
    return dx
end

"Allocating [`dropout_backward!`](@ref)."
dropout_backward(x::AbstractVecOrMat, dy::AbstractVecOrMat, p::Real, seed::Integer,
                 offset::Integer=0; kw...) =
    dropout_backward!(similar(x), x, dy, p, seed, offset; kw...)

# --- rows sharded by columns -----------------------------------------------------------------
# Each process or device holds a slice of longer softmax rows. Forward: row_stats on every
# shard; merge with M = max of the shard maxima, S = sum of row_sumexp .* exp.(shard max .- M)
# (leaving out terms whose row_sumexp is 0); rows_from_stats(x, M, S) on every shard. Backward:
# backward_row_stats on every shard, sum the row_dot vectors, rows_backward_from_stats.
# Statistics are Float32 vectors, one element per softmax row; Float64 rows are refused.

"""
    row_stats!(row_max, row_sumexp, x; dims=1, kw...) -> (row_max, row_sumexp)

This shard's per-row statistics: `row_max = max(x)`, `row_sumexp = sum(exp.(x .- row_max))`
for each softmax row (column of `x` for `dims=1`).
"""
function row_stats!(row_max::AbstractVector{Float32}, row_sumexp::AbstractVector{Float32},
                    x::AbstractVecOrMat{Tx}; dims::Integer=1, backend::Symbol=default_backend(x),
                    num_threads::Integer=0) where {Tx<:Element}
    stats_along(dims, (x,)) do x
        rows, cols = c_shape(x)
        per_row(rows, ("row_max", row_max), ("row_sumexp", row_sumexp))
        opts = options(x, Tx, Tx; backend, num_threads)
        GC.@preserve x row_max row_sumexp check(@ccall $(FN[:softmax_row_stats])(
            memptr(x)::Ptr{Cvoid}, memptr(row_max)::Ptr{Cvoid}, memptr(row_sumexp)::Ptr{Cvoid},
            rows::Int64, cols::Int64, DTYPE[Tx]::Cint, Ref(opts)::Ref{Options})::Cint)
    end
    return row_max, row_sumexp
end

"Allocating [`row_stats!`](@ref)."
function row_stats(x::AbstractVecOrMat; dims::Integer=1, kw...)
    n = x isa AbstractVector ? 1 : size(x, dims == 1 ? 2 : 1)
    return row_stats!(similar(x, Float32, n), similar(x, Float32, n), x; dims, kw...)
end

"""
    rows_from_stats!(y, x, row_max, row_sumexp; dims=1, log=false, kw...) -> y

This shard's softmax from the merged statistics: `exp.(x .- row_max) ./ row_sumexp` per softmax
row (`log=true`: `x .- row_max .- log.(row_sumexp)`).
"""
function rows_from_stats!(y::AbstractVecOrMat{Ty}, x::AbstractVecOrMat{Tx},
                          row_max::AbstractVector{Float32}, row_sumexp::AbstractVector{Float32};
                          dims::Integer=1, log::Bool=false, backend::Symbol=default_backend(x),
                          num_threads::Integer=0) where {Tx<:Element,Ty<:Element}
    along(dims, (y,), (x,)) do y, x
        rows, cols = same_shape(x, ("y", y))
        per_row(rows, ("row_max", row_max), ("row_sumexp", row_sumexp))
        opts = options(x, Tx, Ty; backend, log, num_threads)
        GC.@preserve x y row_max row_sumexp check(@ccall $(FN[:softmax_rows_from_stats])(
            memptr(x)::Ptr{Cvoid}, memptr(y)::Ptr{Cvoid}, memptr(row_max)::Ptr{Cvoid},
            memptr(row_sumexp)::Ptr{Cvoid}, rows::Int64, cols::Int64, DTYPE[Tx]::Cint,
            Ref(opts)::Ref{Options})::Cint)
    end
    return y
end

"Allocating [`rows_from_stats!`](@ref); `dtype` is the result's element type."
rows_from_stats(x::AbstractVecOrMat, row_max, row_sumexp; dtype::Type=eltype(x), kw...) =
    rows_from_stats!(similar(x, dtype), x, row_max, row_sumexp; kw...)

"""
    backward_row_stats!(row_dot, y, dy; dims=1, log=false, kw...) -> row_dot

This shard's part of the backward's row sums: `sum(dy .* y)` per softmax row (`log=true`:
`sum(dy)`).
"""
function backward_row_stats!(row_dot::AbstractVector{Float32}, y::AbstractVecOrMat{Ty},
                             dy::AbstractVecOrMat{Ty}; dims::Integer=1, log::Bool=false,
                             backend::Symbol=default_backend(y),
                             num_threads::Integer=0) where {Ty<:Element}
    stats_along(dims, (y, dy)) do y, dy
        rows, cols = same_shape(y, ("dy", dy))
        per_row(rows, ("row_dot", row_dot))
        opts = options(y, Ty, Ty; backend, log, num_threads)
        GC.@preserve y dy row_dot check(@ccall $(FN[:softmax_backward_row_stats])(
            memptr(y)::Ptr{Cvoid}, memptr(dy)::Ptr{Cvoid}, memptr(row_dot)::Ptr{Cvoid},
            rows::Int64, cols::Int64, DTYPE[Ty]::Cint, Ref(opts)::Ref{Options})::Cint)
    end
    return row_dot
end

"Allocating [`backward_row_stats!`](@ref)."
function backward_row_stats(y::AbstractVecOrMat, dy::AbstractVecOrMat; dims::Integer=1, kw...)
    n = y isa AbstractVector ? 1 : size(y, dims == 1 ? 2 : 1)
    return backward_row_stats!(similar(y, Float32, n), y, dy; dims, kw...)
end

"""
    rows_backward_from_stats!(dx, y, dy, row_dot; dims=1, log=false, kw...) -> dx

This shard's gradient from the summed `row_dot`: `y .* (dy .- row_dot)` per softmax row
(`log=true`: `dy .- exp.(y) .* row_dot`).
"""
function rows_backward_from_stats!(dx::AbstractVecOrMat{Tx}, y::AbstractVecOrMat{Ty},
                                   dy::AbstractVecOrMat{Ty}, row_dot::AbstractVector{Float32};
                                   dims::Integer=1, log::Bool=false,
                                   backend::Symbol=default_backend(y),
                                   num_threads::Integer=0) where {Tx<:Element,Ty<:Element}
    along(dims, (dx,), (y, dy)) do dx, y, dy
        rows, cols = same_shape(y, ("dy", dy), ("dx", dx))
        per_row(rows, ("row_dot", row_dot))
        opts = options(y, Tx, Ty; backend, log, num_threads)
        GC.@preserve y dy dx row_dot check(@ccall $(FN[:softmax_rows_backward_from_stats])(
            memptr(y)::Ptr{Cvoid}, memptr(dy)::Ptr{Cvoid}, memptr(dx)::Ptr{Cvoid},
            memptr(row_dot)::Ptr{Cvoid}, rows::Int64, cols::Int64, DTYPE[Tx]::Cint,
            Ref(opts)::Ref{Options})::Cint)
    end
    return dx
end

"Allocating [`rows_backward_from_stats!`](@ref); `dtype` is dx's element type."
rows_backward_from_stats(y::AbstractVecOrMat, dy::AbstractVecOrMat, row_dot;
                         dtype::Type=eltype(y), kw...) =
    rows_backward_from_stats!(similar(y, dtype), y, dy, row_dot; kw...)

end # module
