# SPDX-License-Identifier: Apache-2.0
# LibSoftmax's tests: Float32/Float16/Float64 against a Float64 reference on fresh random inputs
# (seed printed), mixed result types, dims=2, dropout consistency and reproducibility, gradients
# (also through the ChainRulesCore rules), the sharded-row helpers, errors; CuArray tests when
# CUDA.jl finds a GPU and the library has its CUDA backend.
#
#   SOFTMAX_LIBRARY=/path/to/libsoftmax.so julia --project=bindings/julia/LibSoftmax -e 'using Pkg; Pkg.test()'
#
# NOT RUN on the project's build machines: no Julia toolchain can be installed there.
using LibSoftmax
using ChainRulesCore
using Random
using Test

const SEED = haskey(ENV, "SOFTMAX_TEST_SEED") ? parse(UInt64, ENV["SOFTMAX_TEST_SEED"]) : rand(RandomDevice(), UInt64)
println("random inputs from seed $SEED (SOFTMAX_TEST_SEED=$SEED repeats them)")
const RNG = Xoshiro(SEED)

# Softmax of each column in Float64: the column is the C row.
function reference(x::AbstractMatrix; log=false)
    x64 = Float64.(x)
    m = maximum(x64; dims=1)
    s = sum(exp.(x64 .- m); dims=1)
    return log ? x64 .- m .- Base.log.(s) : exp.(x64 .- m) ./ s
end
reference(x::AbstractVector; log=false) = vec(reference(reshape(x, :, 1); log))

# The gradient of each column's softmax in Float64, from the forward output y.
function reference_backward(y, dy; log=false)
    y, dy = Float64.(y), Float64.(dy)
    return log ? dy .- exp.(y) .* sum(dy; dims=1) : y .* (dy .- sum(dy .* y; dims=1))
end

# The C++ suites' tolerance (tests/common/reference.h): storage rounding plus the arithmetic's
# error (Float64 arithmetic when any array is Float64).
storage(::Type{Float64}) = 2.0^-53
storage(::Type{Float32}) = 2.0^-24
storage(::Type{Float16}) = 2.0^-11
arith(cols, fp64) = (fp64 ? 1e-14 : 1e-6) * (1 + log2(cols + 1) / 8)
function tolerance(::Type{T}, want, log, cols; fp64=T === Float64) where {T}
    a = arith(cols, fp64)
    floor = T === Float16 ? 2.0^-24 : 0.0
    return abs(want) * (storage(T) + a) + (log ? a * (1 + abs(want)) : floor + 1e-300)
end

function close_enough(y::AbstractArray{T}, want; log=false, fp64=T === Float64) where {T}
    cols = size(want, 1)
    return all(abs(Float64(g) - w) <= tolerance(T, w, log, cols; fp64)
               for (g, w) in zip(y, want))
end

# Gradient tolerance: the arithmetic's error scales with the terms added per column.
function backward_close(dx::AbstractArray{T}, y, dy; log=false, factor=1) where {T}
    y, dy = Float64.(y), Float64.(dy)
    want = reference_backward(y, dy; log)
    terms = log ? abs.(dy) .+ exp.(y) .* sum(abs.(dy); dims=1) :
            abs.(y) .* (abs.(dy) .+ sum(abs.(dy .* y); dims=1))
    tol = factor .* terms .* arith(size(y, 1), T === Float64) .+ abs.(want) .* storage(T)
    return all(abs.(Float64.(dx) .- want) .<= tol .+ 1e-300)
end

randx(::Type{T}, dims...) where {T} = T.(16 .* rand(RNG, Float32, dims...) .- 8)

@testset "LibSoftmax (libsoftmax $(libsoftmax_version()), seed $SEED)" begin
    @testset "softmax over columns, $T, log=$log" for T in (Float32, Float16, Float64),
                                                          log in (false, true)
        for (cols, rows) in ((1, 1), (7, 3), (1000, 17), (40_000, 2), (33, 257))
            x = randx(T, cols, rows)
            y = fill(T(NaN), cols, rows)
            rowsoftmax!(y, x; log)
            @test close_enough(y, reference(Float64.(x); log); log)
        end
    end

    @testset "allocating, vector, in-place, dims=2 and empty forms" begin
        x = randx(Float32, 300, 5)
        @test close_enough(rowsoftmax(x), reference(x))
        @test close_enough(rowlogsoftmax(x), reference(x; log=true); log=true)
        v = randx(Float32, 4097)
        @test close_enough(rowsoftmax(v), reference(v))
        z = copy(x)
        rowsoftmax!(z, z)
        @test close_enough(z, reference(x))
        r = rowsoftmax(x; dims=2)  # each Julia row
        @test size(r) == size(x)
        @test close_enough(permutedims(r), reference(permutedims(x)))
        @test size(rowsoftmax(zeros(Float32, 0, 3))) == (0, 3)
        @test size(rowsoftmax(zeros(Float32, 4, 0))) == (4, 0)
        @test_throws ArgumentError rowsoftmax(v; dims=2)
        @test_throws ArgumentError rowsoftmax(x; dims=3)
    end

    @testset "result stored as another type" begin
        x = randx(Float32, 1000, 17)
        for T in (Float16, Float64)
            y = rowsoftmax(x; dtype=T)
            @test eltype(y) === T
            @test close_enough(y, reference(x); fp64=T === Float64)
        end
        y = fill(Float32(NaN), 1000, 17)
        rowlogsoftmax!(y, Float16.(x))
        @test close_enough(y, reference(Float16.(x); log=true); log=true)
    end

    @testset "gradients" begin
        for log in (false, true), T in (Float32, Float64)
            y = T.(reference(randx(Float64, 513, 33); log))
            dy = T.(2 .* rand(RNG, 513, 33) .- 1)
            dx = fill(T(NaN), size(y))
            softmax_backward!(dx, y, dy; log)
            @test backward_close(dx, y, dy; log)
            @test backward_close(softmax_backward(y, dy; log, dtype=Float64), y, dy; log)
            dyc = copy(dy)
            softmax_backward!(dyc, y, dyc; log)  # in place over dy
            @test backward_close(dyc, y, dy; log)
        end
        x = randx(Float32, 700, 37)
        dy = Float32.(2 .* rand(RNG, 700, 37) .- 1)
        _, mask = softmax_dropout(x, 0.25, 1234, 7; return_mask=true)
        s = reference(x)
        g = Float64.(dy) .* (mask .== 1) ./ 0.75
        dx = dropout_backward(x, dy, 0.25, 1234, 7)
        @test backward_close(dx, s, g; factor=2)
        @test all(dropout_backward(x, dy, 1.0, 5) .== 0)
        # dims=2: the gradient of each Julia row
        yr = Float32.(permutedims(reference(permutedims(Float64.(x)))))
        dxr = softmax_backward(yr, dy; dims=2)
        @test backward_close(permutedims(dxr), permutedims(yr), permutedims(dy))
    end

    @testset "ChainRulesCore rules" begin
        x = randx(Float32, 300, 8)
        dy = Float32.(2 .* rand(RNG, 300, 8) .- 1)
        for log in (false, true)
            f = log ? rowlogsoftmax : rowsoftmax
            y, back = ChainRulesCore.rrule(f, x)
            @test close_enough(y, reference(x; log); log)
            tangents = back(dy)
            @test tangents[1] isa NoTangent
            @test backward_close(tangents[2], reference(x; log), dy; log, factor=4)
            @test back(ZeroTangent())[2] isa ZeroTangent
        end
        z, back = ChainRulesCore.rrule(softmax_dropout, x, 0.5, 9, 3)
        _, mask = softmax_dropout(x, 0.5, 9, 3; return_mask=true)
        t = back(dy)
        @test length(t) == 5 && all(t[i] isa NoTangent for i in (1, 3, 4, 5))
        @test backward_close(t[2], reference(x), Float64.(dy) .* (mask .== 1) ./ 0.5; factor=2)
        @test length(ChainRulesCore.rrule(softmax_dropout, x, 0.5, 9)[2](dy)) == 4
    end

    @testset "sharded rows" begin
        x = randx(Float32, 1000, 19)
        shards = (x[1:300, :], x[301:1000, :])
        stats = [row_stats(s) for s in shards]
        M = max.(first.(stats)...)
        S = sum(st[2] .* exp.(st[1] .- M) for st in stats)
        y = vcat((rows_from_stats(s, M, S) for s in shards)...)
        @test close_enough(y, reference(x))
        yy = Float32.(reference(x))
        dy = Float32.(2 .* rand(RNG, 1000, 19) .- 1)
        dot = sum(backward_row_stats(yy[r, :], dy[r, :]) for r in (1:300, 301:1000))
        dx = vcat((rows_backward_from_stats(yy[r, :], dy[r, :], dot) for r in (1:300, 301:1000))...)
        @test backward_close(dx, yy, dy; factor=4)
        e = try row_stats(ones(Float64, 4, 2)) catch err err end
        @test e isa SoftmaxError && e.name == "SOFTMAX_STATUS_INVALID_DTYPE"
    end

    @testset "dropout" begin
        x = randx(Float32, 700, 37)
        p = 0.25
        mask = fill(0xAA, size(x))
        y = softmax_dropout!(similar(x), x, p, 1234, 7; mask)
        @test all(in((0x00, 0x01)), mask)
        @test all(y[mask .== 0] .== 0)
        kept = mask .== 1
        want = reference(x) ./ (1 - p)
        @test all(abs.(Float64.(y[kept]) .- want[kept]) .<= 2 .* tolerance.(Float32, want[kept], false, 700))
        n = length(x)
        @test abs(count(kept) - (1 - p) * n) < 6 * sqrt(n * p * (1 - p))

        y1, m1 = softmax_dropout(x, 0.1, 42, 3; return_mask=true)
        y2, m2 = softmax_dropout(x, 0.1, 42, 3; return_mask=true)
        @test m1 == m2 && reinterpret(UInt32, y1) == reinterpret(UInt32, y2)
        for t in (1, 2, 3)
            @test softmax_dropout(x, 0.1, 42, 3; return_mask=true, num_threads=t)[2] == m1
        end
        # The mask is a function of the linear index, not of the shape.
        @test softmax_dropout(vec(x), 0.1, 42, 3; return_mask=true)[2] == vec(m1)
        @test softmax_dropout(x, 0.1, 43, 3; return_mask=true)[2] != m1
        @test all(softmax_dropout(x, 1.0, 5; return_mask=true)[2] .== 0)
        @test close_enough(softmax_dropout(x, 0.0, 5), reference(x))
    end

    @testset "errors" begin
        x = ones(Float32, 4, 2)
        e = try softmax_dropout(x, 1.5, 1) catch err err end
        @test e isa SoftmaxError
        @test e.name == "SOFTMAX_STATUS_INVALID_PROBABILITY"
        @test occursin("got 1.5", e.message)
        y = fill(Float32(NaN), 4, 2)
        @test_throws SoftmaxError softmax_dropout!(y, x, NaN, 1)
        @test all(isnan, y)  # nothing written on failure
        @test_throws SoftmaxError rowsoftmax(x; num_threads=-1)
        @test_throws DimensionMismatch rowsoftmax!(zeros(Float32, 2, 4), x)
        @test_throws DimensionMismatch softmax_dropout!(similar(x), x, 0.5, 1; mask=zeros(UInt8, 3))
        @test_throws DimensionMismatch softmax_backward(x, ones(Float32, 2, 4))
        @test_throws DimensionMismatch rows_from_stats(x, ones(Float32, 3), ones(Float32, 2))
        @test_throws ArgumentError rowsoftmax(x; backend=:gpu)
        @test_throws MethodError rowsoftmax(zeros(Int32, 4, 2))        # not a storage type
        @test_throws MethodError rowsoftmax(zeros(Float32, 2, 2, 2))   # only vectors and matrices
        @test_throws MethodError rowsoftmax!(zeros(Float32, 4, 2)', x') # adjoint: not contiguous
        @test_throws MethodError softmax_backward(x, Float16.(x))      # y and dy: one type
        if !backend_available(:cuda)
            e = try rowsoftmax(x; backend=:cuda) catch err err end
            @test e isa SoftmaxError && e.name == "SOFTMAX_STATUS_BACKEND_UNAVAILABLE"
        end
    end
end

# CuArray tests: need CUDA.jl in the active environment (it is not a test dependency, so that
# Pkg.test() works on machines without it), a functional GPU and a CUDA-built libsoftmax. Loaded
# at top level so that the extension's methods are visible to the included tests.
const HAVE_CUDA_JL = try
    @eval using CUDA
    true
catch
    false
end
if HAVE_CUDA_JL && CUDA.functional() && backend_available(:cuda)
    include("cuda.jl")
else
    @info "CuArray tests skipped: need CUDA.jl, a functional GPU and libsoftmax built with CUDA"
end
